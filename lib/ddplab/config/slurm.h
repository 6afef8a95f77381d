// The "slurm" section of a spec: how `ddplab run --launcher slurm` (runner/slurm.h) asks sbatch
// for each run's job. Every field is optional; an unset one is not passed to sbatch (the
// cluster's default applies). The command line (--partition, --time, --account, --sbatch-option)
// overrides the section: merged().
//
//   "slurm": {"partition": "gpu", "time": "2:00:00", "account": "proj42",
//             "options": ["--qos=high", "--exclusive"]}
//
// The section is not a training setting: it never splits report groups, and a run resumed with
// other SLURM settings is still the same run (rundir/run_log.h compares specs without it).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddplab::config {

struct SlurmOptions {
  std::string partition;             // sbatch --partition; "": unset
  std::string time;                  // sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED; "": unset
  std::string account;               // sbatch --account; "": unset
  std::vector<std::string> options;  // more sbatch arguments, each one "--name=value" or "--flag"

  bool operator==(const SlurmOptions& other) const;
};

// The section of the spec document `doc` (its "slurm" object; none: all unset), checked as
// check_slurm_options with the JSON pointers ("/slurm/time").
SlurmOptions slurm_options(const nlohmann::json& doc);

// Throws ddplab::Error naming the field (`names` says how: "/slurm/" + field for a spec,
// "--" + field for the command line) and what was expected:
//   - partition and account: no whitespace or control characters;
//   - time: one of SLURM's formats above (numbers of digits, minutes and seconds below 60 after
//     the first field);
//   - options: each starts with '-', has no whitespace (one argument: "--qos=high", not "--qos high")
//     and is none of the options ddplab sets itself (--ntasks/-n, --cpus-per-task/-c,
//     --gpus-per-task, --job-name/-J, --output/-o, --error/-e, --open-mode, --dependency/-d,
//     --parsable, --wrap) or that have a field above (--partition/-p, --time/-t, --account/-A).
enum class SlurmNames { kSpec, kCommandLine };
void check_slurm_options(const SlurmOptions& options, SlurmNames names);

// `base` with every set field of `over` replacing its own, and `over`'s options after its own.
SlurmOptions merged(const SlurmOptions& base, const SlurmOptions& over);

}  // namespace ddplab::config
