#include "ddplab/plan/probe.h"

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/rundir/run_log.h"

namespace ddplab::plan {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path probe_file(const fs::path& calibration_dir) { return calibration_dir / "probe.json"; }

std::vector<int64_t> probe_sizes() {
  std::vector<int64_t> out;
  for (int64_t bytes = 4 << 10; bytes <= (16 << 20); bytes *= 4) out.push_back(bytes);
  return out;
}

json AllReduceProbe::to_json() const {
  json pts = json::array();
  for (const auto& p : points) pts.push_back({{"replicas", p.replicas}, {"bytes", p.bytes}, {"seconds", p.seconds}});
  return {{"backend", backend},
          {"device", device},
          {"repetitions", repetitions},
          {"points", pts},
          {"seconds_per_byte", fit.seconds_per_byte},
          {"bandwidth_bytes_per_s", bandwidth_bytes_per_s()},
          {"latency_s", fit.latency_s},
          {"model", "seconds = 2 (N - 1) / N x bytes / bandwidth + latency (median of each size)"},
          {"created", created}};
}

AllReduceProbe AllReduceProbe::from_json(const json& j, const std::string& where) {
  try {
    AllReduceProbe p;
    p.backend = j.at("backend").get<std::string>();
    p.device = j.value("device", std::string("cpu"));
    p.repetitions = j.value("repetitions", kProbeRepetitions);
    for (const auto& pt : j.at("points"))
      p.points.push_back({pt.at("replicas").get<int>(), pt.at("bytes").get<double>(), pt.at("seconds").get<double>()});
    p.fit = {j.at("seconds_per_byte").get<double>(), j.at("latency_s").get<double>()};
    p.created = j.value("created", std::string());
    p.file = where;
    return p;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not an all-reduce probe ({}); delete it to probe again", where, e.what()));
  }
}

std::optional<AllReduceProbe> make_probe(const std::string& backend, const std::string& device,
                                         std::vector<ProbePoint> points) {
  const auto fit = fit_allreduce(points);
  if (!fit) return std::nullopt;
  AllReduceProbe p;
  p.backend = backend;
  p.device = device;
  p.points = std::move(points);
  p.fit = *fit;
  p.created = rundir::utc_now();
  return p;
}

std::optional<AllReduceProbe> find_probe(const std::vector<fs::path>& dirs) {
  for (const auto& dir : dirs) {
    const fs::path file = probe_file(dir);
    if (fs::exists(file)) return AllReduceProbe::from_json(rundir::read_json(file), file.string());
  }
  return std::nullopt;
}

void write_probe(const AllReduceProbe& probe, const fs::path& dir) {
  fs::create_directories(dir);
  rundir::write_file_atomic(probe_file(dir), probe.to_json().dump(2) + "\n");
}

}  // namespace ddplab::plan
