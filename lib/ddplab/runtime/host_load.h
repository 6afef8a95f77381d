// How busy the host was while a run trained: what lets a report tell a slow setting from a slow
// machine. Two Linux counters, read at the start and the end of an interval (an epoch):
//
//   CPU wait  /proc/pressure/cpu "some" total (PSI, Linux 4.20+): microseconds in which at least
//             one runnable task waited for a CPU. Over an interval, in percent of its wall time.
//             With no more busy threads than cores it stays near 0; another job on the cores, or
//             more threads than cores, raises it.
//   steal     /proc/stat's first "cpu" line, the steal column (8th value): time the hypervisor ran
//             something else while this VM's CPUs wanted to run. In percent of all CPU time of the
//             interval (all columns summed).
//
// A counter the kernel does not offer (PSI off, not Linux) gives nullopt, never 0. Both are
// host-wide: they say how crowded the machine was, not what this run used.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <utility>

namespace ddplab::runtime {

// The counters at one moment.
struct HostSample {
  std::chrono::steady_clock::time_point at;
  std::optional<double> cpu_some_us;                 // PSI cpu "some" total, microseconds
  std::optional<double> steal_jiffies, all_jiffies;  // /proc/stat cpu line: steal, sum of all columns
};

// What an interval saw, in percent (0-100); nullopt where a counter is missing at either end or
// the interval is empty.
struct HostLoad {
  std::optional<double> cpu_wait_pct;
  std::optional<double> steal_pct;
};

HostSample sample_host();
HostLoad host_load_between(const HostSample& start, const HostSample& end);

// The parsers behind sample_host, on the files' text: the "total=" of the line starting "some"
// of /proc/pressure/cpu, and (steal, sum of all values) of the line starting "cpu " of /proc/stat.
// nullopt when the line or the value is not there.
std::optional<double> parse_pressure_some_total(const std::string& text);
std::optional<std::pair<double, double>> parse_proc_stat_steal(const std::string& text);

}  // namespace ddplab::runtime
