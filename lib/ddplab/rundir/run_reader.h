// Reading run directories back, beside their layout (layout.h) and their writer (run_log.h), as
// leveldb keeps log_reader.h next to log_writer.h and filename.h. Every reader of epochs.jsonl and
// steps.jsonl reads through here: the report, the planner, `ddplab status`, the TensorBoard
// export, a resume (epochs.csv made anew), a packed sweep's progress and a run's outcome.
// manifest.json is read by read_manifest (run_log.h), here once per run into RunData::manifest.
//
// One rule for the records of epochs.jsonl and steps.jsonl, whoever reads them:
//   - a blank line holds no record;
//   - a line that does not read is skipped, wherever it is, with a note "<file>:<line>: skipped
//     corrupt record (<why>)" ("skipped corrupt step record" in steps.jsonl), <why> being "not valid
//     JSON" (a line torn by a crash, or edited by hand) or what EpochRecord::from_json /
//     StepRecord::from_json refused ("lr: expected a number, got \"fast\""); the records around it
//     still count, so one bad line costs one epoch, not the run. What a caller does with the notes
//     is its own: the report lists them as warnings, a resume refuses to go on over them;
//   - a later record for the same epoch (a step record: the same step) replaces an earlier one, as
//     the records a resumed run writes again replace those it wrote after its checkpoint; records
//     come back by epoch (step).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ddplab/rundir/run_data.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::rundir {

// <dir>/epochs.jsonl by the rule above; none when the file is missing.
std::vector<EpochRecord> read_epoch_records(const std::filesystem::path& dir, std::vector<std::string>& notes);
// <dir>/steps.jsonl by the rule above; none when the file is missing (runs without log.every_steps).
std::vector<StepRecord> read_step_records(const std::filesystem::path& dir, std::vector<std::string>& notes);

// Reads one run directory: manifest.json (read_manifest; throws Error naming it when it is not
// one), spec.json (read_json; missing or unreadable: null spec, grouped alone, with a note "<why>;
// grouped alone"), epochs.jsonl and steps.jsonl. A run whose records hold audit_warnings
// (debug.audits "warn") gets one note too: "<dir>: audits failed in N of its M epochs and it
// trained on (debug.audits warn); the first: <message>".
RunData read_run(const std::filesystem::path& dir, std::vector<std::string>& notes);

// The run directories at or below `inputs`, sorted: a directory holding manifest.json is a run;
// otherwise its subdirectories are searched recursively. Throws Error "<dir>: no runs found (no
// manifest.json below it)" for an input without any, or "<dir>: not a directory" when missing.
std::vector<std::filesystem::path> find_run_dirs(const std::vector<std::filesystem::path>& inputs);

}  // namespace ddplab::rundir
