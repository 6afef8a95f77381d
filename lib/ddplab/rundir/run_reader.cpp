#include "ddplab/rundir/run_reader.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/layout.h"

namespace ddplab::rundir {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
std::string str_field(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The records of `file` read by `Record::from_json`, by `key_of`, as the header's rule says.
template <typename Record, typename KeyOf>
std::vector<Record> read_records(const fs::path& file, const char* what, const KeyOf& key_of,
                                 std::vector<std::string>& notes) {
  std::map<decltype(key_of(Record())), Record> by_key;
  std::ifstream in(file);
  std::string line;
  for (int line_no = 1; in && std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string why;
    try {
      Record record = Record::from_json(json::parse(line));
      by_key[key_of(record)] = std::move(record);
      continue;
    } catch (const json::exception&) {
      why = "not valid JSON";
    } catch (const Error& e) {
      why = e.what();
    }
    notes.push_back(fmt::format("{}:{}: skipped corrupt {} ({})", file.string(), line_no, what, why));
  }
  std::vector<Record> records;
  for (auto& [key, record] : by_key) records.push_back(std::move(record));
  return records;
}

// run_id, status, message and experiment from manifest.json. Any status is kept (and shown): a
// report reads run directories that ddplab did not necessarily write.
void read_manifest_fields(const fs::path& dir, RunData& run) {
  run.manifest = read_manifest(dir);
  run.run_id = str_field(run.manifest, "run_id", run.run_id);
  run.status_name = str_field(run.manifest, "status", "unknown");
  run.status = parse_status(run.status_name);
  run.message = str_field(run.manifest, "message", "");
  run.experiment = str_field(run.manifest, "experiment", "");
  run.step_eval = run.manifest.value("step_eval", json());
}

void read_spec(const fs::path& dir, RunData& run, std::vector<std::string>& notes) {
  const fs::path file = spec_file(dir);
  if (fs::exists(file)) {
    try {
      run.spec = read_json(file);
    } catch (const std::exception& e) {
      notes.push_back(fmt::format("{}; grouped alone", e.what()));
    }
  } else {
    notes.push_back(fmt::format("{}: missing; grouped alone", file.string()));
  }
  if (run.spec.is_object()) run.experiment = str_field(run.spec, "name", run.experiment);
}

void audit_note(const RunData& run, std::vector<std::string>& notes) {
  std::map<int, std::string> failed;  // epoch -> its first failed audit
  for (const auto& e : run.epochs)
    if (!e.audit_warnings.empty()) failed[e.epoch] = e.audit_warnings.front();
  if (!failed.empty())
    notes.push_back(
        fmt::format("{}: audits failed in {} of its {} epochs and it trained on (debug.audits warn); "
                    "the first: {}",
                    run.dir.string(), failed.size(), run.epochs.size(), failed.begin()->second));
}

void find_below(const fs::path& dir, std::vector<fs::path>& out) {
  if (fs::exists(manifest_file(dir))) {
    out.push_back(dir);
    return;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) find_below(entry.path(), out);
}
}  // namespace

std::vector<EpochRecord> read_epoch_records(const fs::path& dir, std::vector<std::string>& notes) {
  return read_records<EpochRecord>(epochs_file(dir), "record", [](const EpochRecord& r) { return r.epoch; }, notes);
}

std::vector<StepRecord> read_step_records(const fs::path& dir, std::vector<std::string>& notes) {
  return read_records<StepRecord>(steps_file(dir), "step record", [](const StepRecord& r) { return r.step; }, notes);
}

RunData read_run(const fs::path& dir, std::vector<std::string>& notes) {
  RunData run;
  run.dir = dir;
  run.run_id = dir.filename().string();
  read_manifest_fields(dir, run);
  read_spec(dir, run, notes);
  run.epochs = read_epoch_records(dir, notes);
  audit_note(run, notes);
  run.steps = read_step_records(dir, notes);
  return run;
}

std::vector<fs::path> find_run_dirs(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> dirs;
  for (const auto& input : inputs) {
    if (!fs::is_directory(input)) throw Error(fmt::format("{}: not a directory", input.string()));
    const size_t before = dirs.size();
    find_below(input, dirs);
    if (dirs.size() == before)
      throw Error(
          fmt::format("{}: no runs found (no {} below it)", input.string(), manifest_file(input).filename().string()));
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

}  // namespace ddplab::rundir
