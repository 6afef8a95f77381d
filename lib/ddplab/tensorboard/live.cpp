#include "ddplab/tensorboard/live.h"

#include <chrono>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/rundir/run_reader.h"
#include "ddplab/tensorboard/event_file.h"
#include "ddplab/tensorboard/run_events.h"

namespace ddplab::tensorboard {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

rundir::RunData load(const fs::path& dir) {
  std::vector<std::string> notes;  // a record that does not read is skipped, as the report skips it
  return rundir::read_run(dir, notes);
}

// A name no event file in `dir` has yet.
fs::path unused_event_file(const fs::path& dir, double now, const std::string& host) {
  double t = now;
  while (fs::exists(dir / event_file_name(t, host))) t += 1;
  return dir / event_file_name(t, host);
}

void remove_other_event_files(const fs::path& dir, const fs::path& keep) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path() == keep || entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    std::error_code ec;
    fs::remove(entry.path(), ec);
    if (ec) throw Error(fmt::format("{}: cannot remove ({})", entry.path().string(), ec.message()));
  }
}

// The value of the dotted `key` in spec.json; nullopt when it has none.
std::optional<HParamValue> spec_value(const json& spec, const std::string& key) {
  std::string pointer = "/" + key;
  for (char& c : pointer)
    if (c == '.') c = '/';
  try {
    const json::json_pointer at(pointer);
    if (spec.is_object() && spec.contains(at)) return hparam_value(spec.at(at));
  } catch (const json::exception&) {  // not a key of the spec: a piece of a value that holds ','
  }
  return std::nullopt;
}

}  // namespace

SessionStart live_session(const rundir::RunData& run, double start) {
  SessionStart session;
  session.start_time_secs = start;
  std::vector<std::string> settings;
  std::istringstream pieces(run.run_id);
  for (std::string piece; std::getline(pieces, piece, ',');) {
    const std::string key = piece.substr(0, piece.find('='));
    if (key == piece || key == "seed") continue;
    if (const auto value = spec_value(run.spec, key)) {
      session.hparams[key] = *value;
      settings.push_back(piece);
    }
  }
  if (const auto seed = spec_value(run.spec, "seed")) session.hparams["seed"] = *seed;
  session.group_name =
      settings.empty() ? run.experiment : fmt::format("{}: {}", run.experiment, fmt::join(settings, ", "));
  return session;
}

LiveEventFile::LiveEventFile(const fs::path& run_dir, bool resumed) : dir_(run_dir) {
  const rundir::RunData run = load(dir_);
  const json& manifest = run.manifest;
  const double now = now_s();
  start_ = rundir::manifest_time(manifest, "start").value_or(now);
  file_ = unused_event_file(dir_, now, manifest_host(manifest));
  EventFile file(now);
  if (resumed) file.add(session_log_start_event(now, 0));
  file.add(session_start_event(start_, live_session(run, start_)));
  file.write(file_);
  rundir::append_bytes(file_, new_scalars(run));
  remove_other_event_files(dir_, file_);
}

void LiveEventFile::update() {
  const std::string records = new_scalars(load(dir_));
  if (!records.empty()) rundir::append_bytes(file_, records);
}

void LiveEventFile::finish(SessionStatus status) {
  update();
  const double now = now_s();
  rundir::append_bytes(file_, frame_record(session_end_event(now, status, now)));
}

std::string LiveEventFile::new_scalars(const rundir::RunData& run) {
  std::string records;
  // The training clock's start is written after this file is made; until then (runs written
  // before 2026-12-06: always) wall times count from the run's start.
  if (!clock_) clock_ = rundir::manifest_time(run.manifest, "train_start");
  for (const Scalar& s : run_scalars(run, clock_.value_or(start_))) {
    const auto [last, first] = written_.emplace(s.tag, s.step);
    if (!first && s.step <= last->second) continue;
    last->second = s.step;
    records += frame_record(scalar_event(s.wall_time, s.step, s.tag, static_cast<float>(s.value)));
  }
  return records;
}

}  // namespace ddplab::tensorboard
