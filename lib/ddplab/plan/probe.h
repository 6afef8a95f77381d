// The all-reduce probe's record, probe.json in a calibration directory: the median time of an
// all-reduce of each size in probe_sizes() at each replica count probed (real processes on the
// calibration's backend; runner/allreduce_probe.h measures it), and the bandwidth and latency
// fitted to them (fit.h fit_allreduce). A plan that finds it uses these constants for T_comm
// instead of fitting them from the calibration's step times (docs/planner.md).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/plan/fit.h"

namespace ddplab::plan {

// probe.json, in the calibration directory.
std::filesystem::path probe_file(const std::filesystem::path& calibration_dir);

// The payloads probed, in bytes: 4 KiB to 16 MiB by factors of 4 (float32 tensors).
std::vector<int64_t> probe_sizes();
// Timed all-reduces per size, after one untimed warm-up; the median is kept.
constexpr int kProbeRepetitions = 7;

struct AllReduceProbe {
  std::string backend;  // "gloo" or "nccl"
  std::string device;   // "cpu" or "cuda"
  int repetitions = kProbeRepetitions;
  std::vector<ProbePoint> points;
  CommFit fit;
  std::string created;  // UTC time stamp
  std::string file;     // where it was read from ("" when not read)

  double bandwidth_bytes_per_s() const { return fit.seconds_per_byte > 0 ? 1 / fit.seconds_per_byte : 0; }
  nlohmann::json to_json() const;
  // Throws ddplab::Error naming `where` when `j` is not a probe as to_json writes it.
  static AllReduceProbe from_json(const nlohmann::json& j, const std::string& where);
};

// Fits `points` (fit_allreduce); nullopt when they cannot be fitted.
std::optional<AllReduceProbe> make_probe(const std::string& backend, const std::string& device,
                                         std::vector<ProbePoint> points);

// probe.json of the first of `dirs` that has one; nullopt when none has.
std::optional<AllReduceProbe> find_probe(const std::vector<std::filesystem::path>& dirs);

// Writes probe_file(dir) (atomically).
void write_probe(const AllReduceProbe& probe, const std::filesystem::path& dir);

}  // namespace ddplab::plan
