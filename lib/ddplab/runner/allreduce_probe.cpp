#include "ddplab/runner/allreduce_probe.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/base/exit_codes.h"
#include "ddplab/config/spec.h"
#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/world.h"
#include "ddplab/launch/launcher.h"
#include "ddplab/launch/worker_env.h"
#include "ddplab/report/stats.h"
#include "ddplab/rundir/layout.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runner/console.h"
#include "ddplab/runtime/device.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ddplab::runner {
namespace {

// A probe that takes longer than this has met something other than an all-reduce.
constexpr double kProbeTimeoutS = 120;

// Median seconds of one all-reduce of `bytes` on `comm`'s device over plan::kProbeRepetitions,
// after one warm-up (connections, buffers).
double time_allreduce(distributed::Comm& comm, int64_t bytes) {
  at::Tensor t = at::ones({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(comm.device));
  distributed::allreduce_sum(comm, t);
  std::vector<double> seconds;
  for (int i = 0; i < plan::kProbeRepetitions; ++i) {
    distributed::barrier(comm);
    const auto start = std::chrono::steady_clock::now();
    distributed::allreduce_sum(comm, t);
    runtime::synchronize(comm.device);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return report::percentile(seconds, 0.5);
}

// Every size of plan::probe_sizes(): the slowest rank's median seconds.
std::vector<double> probe_sizes_on(distributed::Comm& comm) {
  std::vector<double> medians;
  for (int64_t bytes : plan::probe_sizes()) medians.push_back(time_allreduce(comm, bytes));
  at::Tensor slowest = at::tensor(medians, at::TensorOptions().dtype(at::kDouble));
  distributed::allreduce_max(comm, slowest);
  return {slowest.data_ptr<double>(), slowest.data_ptr<double>() + slowest.numel()};
}

json points_json(int replicas, const std::vector<double>& medians) {
  json points = json::array();
  const auto sizes = plan::probe_sizes();
  for (size_t i = 0; i < sizes.size(); ++i)
    points.push_back({{"replicas", replicas}, {"bytes", sizes[i]}, {"seconds", medians[i]}});
  return points;
}

// Launches the probe at `n` replicas; its points, or nullopt after saying why on stderr.
std::optional<std::vector<plan::ProbePoint>> probe_at(const fs::path& dir, const std::string& spec_path, int n,
                                                      double timeout_s) {
  launch::LaunchOptions o;
  o.nproc = n;
  o.run_dir = dir / "probe" / fmt::format("N{}", n);
  o.spec_path = spec_path;
  const fs::path out = o.run_dir / "points.json";
  o.extra_args = {"--allreduce-probe", out.string()};
  o.timeout_s = std::min(timeout_s, kProbeTimeoutS);
  fs::create_directories(o.run_dir);
  const launch::LaunchResult result = launch::launch_workers(o);
  if (result.exit_code != kExitOk) {
    complain("ddplab plan: the all-reduce probe at {} replicas failed: {}{}", n, result.reason,
             result.failed_rank >= 0
                 ? fmt::format("; its log: {}", rundir::rank_log_file(o.run_dir, result.failed_rank).string())
                 : std::string());
    return std::nullopt;
  }
  std::vector<plan::ProbePoint> points;
  for (const auto& p : rundir::read_json(out))
    points.push_back({p.at("replicas").get<int>(), p.at("bytes").get<double>(), p.at("seconds").get<double>()});
  return points;
}
}  // namespace

std::optional<plan::AllReduceProbe> reuse_probe(const std::vector<fs::path>& dirs) {
  auto found = plan::find_probe(dirs);
  if (found) say("ddplab plan: reusing the all-reduce probe {} (delete it to probe again)", found->file);
  return found;
}

std::optional<plan::AllReduceProbe> ensure_probe(const fs::path& dir, const std::string& spec_path,
                                                 const std::vector<int>& counts) {
  if (auto found = reuse_probe({dir})) return found;
  const config::ExperimentSpec spec = config::resolve(config::load_document(spec_path), spec_path);
  std::vector<plan::ProbePoint> points;
  for (int n : counts) {
    if (n < 2) continue;
    auto at_n = probe_at(dir, spec_path, n, spec.replicas.timeout_s);
    if (!at_n) return std::nullopt;
    points.insert(points.end(), at_n->begin(), at_n->end());
  }
  auto probe =
      plan::make_probe(config::name(spec.replicas.backend), config::name(spec.replicas.device), std::move(points));
  if (!probe) {
    complain("ddplab plan: no all-reduce probe: no replica count of the grid from 2 to this machine's cores ({})",
             fmt::join(counts, ", "));
    return std::nullopt;
  }
  plan::write_probe(*probe, dir);
  probe->file = plan::probe_file(dir).string();
  say("ddplab plan: all-reduce probe ({} on {}): bandwidth {:.3g} MB/s, latency {:.3g} ms; wrote {}", probe->backend,
      probe->device, probe->bandwidth_bytes_per_s() / 1e6, 1e3 * probe->fit.latency_s, probe->file);
  return probe;
}

int probe_worker_command(const std::string& spec_path, const std::string& out_file) {
  const config::ExperimentSpec spec = config::resolve(config::load_document(spec_path), spec_path);
  const distributed::World world = distributed::discover_world_from_environment();
  const launch::WorkerEnv env = launch::worker_env_from_environment();
  try {
    const auto comm = distributed::make_comm(world, spec.replicas.backend,
                                             std::chrono::milliseconds(static_cast<int64_t>(1000 * kProbeTimeoutS)));
    runtime::select_device(comm->device);
    const std::vector<double> medians = probe_sizes_on(*comm);
    if (world.rank == 0) rundir::write_file_atomic(out_file, points_json(world.size, medians).dump(2) + "\n");
    distributed::shutdown(*comm);
  } catch (const std::exception& e) {
    if (!env.run_dir.empty()) launch::write_error_file(env.run_dir, world.rank, message_of(e));
    throw;
  }
  return kExitOk;
}

}  // namespace ddplab::runner
