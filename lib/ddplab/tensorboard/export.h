// `ddplab export tensorboard DIR... --out OUTDIR`: TensorBoard event files for existing runs,
// written under OUTDIR and never into the run directories (docs/tensorboard.md).
//
// Runs are found and grouped as the report does (report::analyze over the inputs). Each run gets
// OUTDIR/<experiment>/<run_id>/events.out.tfevents.<start>.<host>, replaced when exported again,
// holding, at step = training samples seen (an epoch record's step x its global batch; a step
// record's samples), so that runs at different batch sizes and replica counts line up:
//   per epoch record   train/loss, train/acc, test/loss, test/acc, val/loss, val/acc (with a
//                      validation split), lr, images_per_s, comm_wait_s,
//                      comm_bytes, grad_noise_scale, and epoch (the epoch number);
//   per step record    steps/train_loss, steps/train_acc, steps/lr (steps.jsonl, log.every_steps),
//                      and steps/eval_loss, steps/eval_acc at its evaluation points (log.eval_every_steps);
// a value the record does not hold (null, e.g. grad_noise_scale with one replica) is not written;
//   the HParams session: session_start_info with hparams = the settings that differ across the
//                      exported runs (report::ReportData::differing_keys, dotted) and "seed",
//                      group_name = the run's report group label (so a configuration's seeds form
//                      one session group), then session_end_info with the manifest's status
//                      (session_status).
// Wall times are the manifest's start plus the records' wall_s / elapsed_s.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ddplab/rundir/run_log.h"
#include "ddplab/tensorboard/events.h"

namespace ddplab::tensorboard {

struct ExportOptions {
  std::vector<std::filesystem::path> inputs;  // run directories or directories above them
  std::filesystem::path out_dir;              // created if missing; must not lie inside a run directory
};

struct ExportSummary {
  std::vector<std::filesystem::path> files;  // the event files written, one per run
  std::vector<std::string> warnings;         // the report's: skipped corrupt records, ...
};

// Throws ddplab::Error naming the directory for an input without runs or that does not exist,
// for an out_dir inside a run directory, and for two runs that would share one output directory.
ExportSummary export_runs(const ExportOptions& options);

// The HParams session status of a run's manifest status: done -> success; failed and diverged
// -> failure; interrupted -> failure too (tensorboard 2.21.0's Status has no "aborted": the run
// ended without finishing); running -> running; no status ddplab writes -> unknown.
SessionStatus session_status(std::optional<rundir::RunStatus> status);

}  // namespace ddplab::tensorboard
