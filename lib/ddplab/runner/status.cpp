#include "ddplab/runner/status.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/rundir/health.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_reader.h"
#include "ddplab/runner/console.h"
#include "ddplab/runner/slurm.h"

namespace fs = std::filesystem;

namespace ddplab::runner {

using rundir::RunStatus;

std::string run_state(std::optional<RunStatus> status, const std::string& job_state) {
  if (status && rundir::is_finished(*status)) return rundir::name(*status);
  if (is_active_job_state(job_state)) {
    std::string lower = job_state;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return lower;
  }
  return status ? rundir::name(*status) : "not started";
}

std::string status_table(const std::vector<StatusRow>& rows) {
  const StatusRow header{"RUN", "STATE", "EPOCH", "TEST ACC", "JOB", "SLURM", ""};
  auto cells = [](const StatusRow& r) {
    return std::array<const std::string*, 6>{&r.run, &r.state, &r.epoch, &r.test_acc, &r.job, &r.slurm};
  };
  std::array<size_t, 6> width{};
  for (size_t c = 0; c < width.size(); ++c) width[c] = cells(header)[c]->size();
  for (const auto& r : rows)
    for (size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], cells(r)[c]->size());
  std::string table;
  auto line = [&](const StatusRow& r) {
    std::string text;
    for (size_t c = 0; c < width.size(); ++c)
      text += c + 1 < width.size() ? fmt::format("{:<{}}  ", *cells(r)[c], width[c]) : *cells(r)[c];
    table += fmt::format("{}\n", text);
  };
  line(header);
  for (const auto& r : rows) line(r);
  return table;
}

namespace {

bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(rundir::manifest_file(dir), ec) || fs::exists(rundir::slurm_spec_file(dir), ec);
}

// Whether run id a sorts before b with the numbers in them compared as numbers, so that
// batch.global=64 comes before batch.global=256 and lr=0.05 before lr=0.2.
bool numeric_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      char *end_a = nullptr, *end_b = nullptr;
      const double x = std::strtod(a.c_str() + i, &end_a), y = std::strtod(b.c_str() + j, &end_b);
      if (x != y) return x < y;
      i = static_cast<size_t>(end_a - a.c_str());
      j = static_cast<size_t>(end_b - b.c_str());
    } else if (a[i] != b[j]) {
      return a[i] < b[j];
    } else {
      ++i, ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

void find_runs(const fs::path& dir, std::vector<fs::path>& out) {
  if (is_run_dir(dir)) {
    out.push_back(dir);
    return;
  }
  std::vector<fs::path> below;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory(ec)) below.push_back(entry.path());
  std::sort(below.begin(), below.end(),
            [](const fs::path& x, const fs::path& y) { return numeric_less(x.filename(), y.filename()); });
  for (const auto& d : below) find_runs(d, out);
}

// The epochs recorded / the spec's, and the last record's test accuracy.
void fill_epochs(const fs::path& dir, StatusRow& row) {
  std::vector<std::string> notes;  // a record that does not read is the report's to name
  const auto records = rundir::read_epoch_records(dir, notes);
  int epochs = 0;
  for (const fs::path& spec : {rundir::spec_file(dir), rundir::slurm_spec_file(dir)}) {
    std::error_code ec;
    if (epochs > 0 || !fs::exists(spec, ec)) continue;
    const auto j = rundir::read_json(spec);
    if (j.is_object() && j.contains("epochs") && j["epochs"].is_number_integer()) epochs = j["epochs"].get<int>();
  }
  const size_t n = records.size();
  row.epoch = n == 0 ? "-" : epochs > 0 ? fmt::format("{}/{}", n, epochs) : fmt::format("{}", n);
  row.test_acc =
      n > 0 && std::isfinite(records.back().test_acc) ? fmt::format("{:.2f}%", 100 * records.back().test_acc) : "-";
}

// Asks SLURM about recorded jobs; after its first failure says why once and asks no more.
class JobAsker {
 public:
  // The SLURM column of job `id` (and its state in `state`).
  std::string describe(const std::string& id, std::string& state) {
    state.clear();
    if (failed_) return "?";
    try {
      const JobInfo info = query_job(id);
      state = info.state;
      if (info.state.empty()) return "unknown";
      const bool why = !info.reason.empty() && info.reason != "None" && is_active_job_state(info.state);
      return why ? fmt::format("{} ({})", info.state, info.reason) : info.state;
    } catch (const Error& e) {
      complain("ddplab status: cannot ask SLURM about job {}: {}", id, e.what());
      failed_ = true;
      return "?";
    }
  }

 private:
  bool failed_ = false;
};

// A run an older ddplab called done though it collapsed or diverged: its state from its records.
void judge_by_records(const fs::path& dir, StatusRow& row) {
  std::vector<std::string> notes;
  const rundir::RunData run = rundir::read_run(dir, notes);
  if (const auto failed = rundir::failed_ending(run.epochs, run.classes())) {
    row.state = rundir::name(failed->status);
    row.judged = failed->message;
  }
}

StatusRow run_row(const fs::path& dir, JobAsker& asker) {
  StatusRow row;
  row.run = dir.filename().string();
  std::error_code ec;
  std::optional<RunStatus> status;
  if (fs::exists(rundir::manifest_file(dir), ec)) {
    status = rundir::read_status(dir);
    if (!status) row.state = "?";
  }
  std::string job_state;
  const auto id = recorded_job_id(rundir::slurm_job_file(dir));
  row.job = id ? *id : "-";
  row.slurm = id ? asker.describe(*id, job_state) : "-";
  if (row.state.empty()) row.state = run_state(status, job_state);
  fill_epochs(dir, row);
  if (status == RunStatus::kDone) judge_by_records(dir, row);
  return row;
}

// Why a run that did not finish well ended: "failed (exit code 1): rank 1 ...", from its manifest,
// or from its records for a run judged by them (StatusRow::judged); "" for any other run.
std::string ending_of(const fs::path& dir, const StatusRow& row) {
  const std::string& state = row.state;
  if (!row.judged.empty())
    return fmt::format("{} (judged from its records; its manifest, written by an older ddplab, says done)", row.judged);
  if (state != rundir::name(RunStatus::kFailed) && state != rundir::name(RunStatus::kInterrupted) &&
      state != rundir::name(RunStatus::kDiverged) && state != rundir::name(RunStatus::kCollapsed))
    return "";
  const auto manifest = rundir::read_manifest(dir);
  const auto text = manifest.find("message");
  std::string message = text != manifest.end() && text->is_string() ? text->get<std::string>() : "";
  if (const auto nl = message.find_last_not_of('\n'); nl != std::string::npos) message.resize(nl + 1);
  if (const auto nl = message.rfind('\n'); nl != std::string::npos) message = message.substr(nl + 1);
  const auto code = manifest.find("exit_code");
  return fmt::format(
      "{}{}: {}", state,
      code != manifest.end() && code->is_number_integer() ? fmt::format(" (exit code {})", code->get<int>()) : "",
      message.empty() ? "no message recorded" : message);
}

// The runs of the sweep in experiment directory `dir` that have no directory yet, in the sweep's
// order (from sweep/runs.json; none without it).
std::vector<std::string> pending_runs(const fs::path& dir, const std::vector<fs::path>& found) {
  std::error_code ec;
  if (!fs::exists(rundir::sweep_runs_file(dir), ec)) return {};
  const auto plan = rundir::read_json(rundir::sweep_runs_file(dir));
  std::vector<std::string> pending;
  if (!plan.is_object() || !plan.contains("runs") || !plan["runs"].is_array()) return pending;
  for (const auto& id : plan["runs"])
    if (id.is_string() && std::find(found.begin(), found.end(), dir / id.get<std::string>()) == found.end())
      pending.push_back(id.get<std::string>());
  return pending;
}

}  // namespace

int status_command(const std::string& where) {
  const fs::path dir(where);
  if (!fs::is_directory(dir))
    throw Error(
        fmt::format("{}: not a directory (ddplab status [DIR]: an experiment or run directory; default: "
                    "the spec's default output)",
                    where));
  std::vector<fs::path> runs;
  find_runs(dir, runs);
  const auto pending = is_run_dir(dir) ? std::vector<std::string>{} : pending_runs(dir, runs);
  if (runs.empty() && pending.empty())
    throw Error(fmt::format("{}: no runs found (no {} or {} below it)", where,
                            rundir::manifest_file(dir).filename().string(),
                            rundir::slurm_spec_file(dir).filename().string()));
  JobAsker asker;
  std::vector<StatusRow> rows;
  std::vector<std::string> endings;
  std::map<std::string, int> counts;
  for (const auto& run : runs) {
    rows.push_back(run_row(run, asker));
    ++counts[rows.back().state];
    if (auto ending = ending_of(run, rows.back()); !ending.empty())
      endings.push_back(fmt::format("{}: {}", rows.back().run, ending));
  }
  for (const auto& id : pending) {
    rows.push_back({id, "pending", "-", "-", "-", "-", ""});
    ++counts["pending"];
  }
  fmt::print("{}", status_table(rows));
  std::string summary = fmt::format("ddplab: {} run{}:", rows.size(), rows.size() == 1 ? "" : "s");
  bool first = true;
  for (const auto& [state, n] : counts) {
    summary += fmt::format("{} {} {}", first ? "" : ",", n, state);
    first = false;
  }
  const auto report = is_run_dir(dir) ? std::nullopt : recorded_job_id(rundir::slurm_job_file(dir));
  if (report) {
    std::string state;
    summary += fmt::format("; report job {}: {}", *report, asker.describe(*report, state));
  }
  say("{}", summary);
  for (const auto& line : endings) say("ddplab:   {}", line);
  return kExitOk;
}

}  // namespace ddplab::runner
