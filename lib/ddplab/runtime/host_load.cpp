#include "ddplab/runtime/host_load.h"

#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace ddplab::runtime {

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The line of `text` that starts with `prefix`, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::optional<double> percent(double part, double whole) {
  if (!(whole > 0) || part < 0) return std::nullopt;
  return 100.0 * part / whole;
}

}  // namespace

std::optional<double> parse_pressure_some_total(const std::string& text) {
  const std::string line = line_starting(text, "some ");
  const auto at = line.find("total=");
  if (at == std::string::npos) return std::nullopt;
  try {
    return std::stod(line.substr(at + 6));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::pair<double, double>> parse_proc_stat_steal(const std::string& text) {
  std::istringstream fields(line_starting(text, "cpu "));
  std::string name;
  fields >> name;
  std::vector<double> values;
  for (double v; fields >> v;) values.push_back(v);
  if (values.size() < 8) return std::nullopt;  // user nice system idle iowait irq softirq steal ...
  double all = 0;
  for (double v : values) all += v;
  return std::make_pair(values[7], all);
}

HostSample sample_host() {
  HostSample s;
  s.at = std::chrono::steady_clock::now();
  s.cpu_some_us = parse_pressure_some_total(read_text("/proc/pressure/cpu"));
  if (const auto stat = parse_proc_stat_steal(read_text("/proc/stat"))) {
    s.steal_jiffies = stat->first;
    s.all_jiffies = stat->second;
  }
  return s;
}

HostLoad host_load_between(const HostSample& start, const HostSample& end) {
  HostLoad load;
  const double wall_us = std::chrono::duration<double, std::micro>(end.at - start.at).count();
  if (start.cpu_some_us && end.cpu_some_us) load.cpu_wait_pct = percent(*end.cpu_some_us - *start.cpu_some_us, wall_us);
  if (start.steal_jiffies && end.steal_jiffies)
    load.steal_pct = percent(*end.steal_jiffies - *start.steal_jiffies, *end.all_jiffies - *start.all_jiffies);
  return load;
}

}  // namespace ddplab::runtime
