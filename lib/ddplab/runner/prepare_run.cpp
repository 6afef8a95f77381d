#include "ddplab/runner/prepare_run.h"

#include <optional>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/train/options.h"
#include "ddplab/train/trainer.h"

namespace ddplab::runner {
namespace {

void refuse_finished_run(const config::ExperimentSpec& spec) {
  const auto dir = rundir::run_dir(spec);
  const std::optional<rundir::RunStatus> status = rundir::read_status(dir);
  if (status && rundir::is_finished(*status))
    throw Error(
        fmt::format("{}: holds a finished run (status {}); set DDPLAB_FORCE=1 to replace it, or give another "
                    "name or output",
                    dir.string(), rundir::name(*status)));
}

}  // namespace

PreparedRun prepare_run(const config::ExperimentSpec& spec, const RunStart& start) {
  auto data = data::load_dataset(train::dataset_options(spec.dataset));
  train::check_setup(spec, data);
  std::optional<rundir::RunLog> resumed =
      start.resume ? rundir::RunLog::resume(spec, start.resume_reason) : std::nullopt;
  if (resumed) return {std::move(data), *resumed, true};
  if (start.keep_finished) refuse_finished_run(spec);
  return {std::move(data), rundir::RunLog::create(spec, start.replace), false};
}

}  // namespace ddplab::runner
