#include "test_util.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ddplab/data/cifar.h"
#include "ddplab/data/idx.h"

namespace ddplab::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ddplab-test-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::str(const std::string& child) const {
  return child.empty() ? path_.string() : (path_ / child).string();
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

CommandResult run_ddplab(const std::string& args) { return run_command(std::string(DDPLAB_BIN) + " " + args); }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> process_thread_ids() {
  std::set<std::string> ids;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    ids.insert(task.path().filename().string());
  return ids;
}

int64_t threads_started(const std::set<std::string>& before, const std::set<std::string>& after) {
  return std::count_if(after.begin(), after.end(), [&](const std::string& id) { return before.count(id) == 0; });
}

IntraOpThreads::IntraOpThreads(int n) : old_(at::get_num_threads()) {
  at::set_num_threads(n);
  // An ATen op above its grain size: at::parallel_for here would run serially (this code is
  // compiled without -fopenmp: runtime/denormal.cpp).
  at::empty({1 << 16}, at::kFloat).fill_(1);
}

IntraOpThreads::~IntraOpThreads() { at::set_num_threads(old_); }

double share_of_denormals_kept() {
  // Written as bits: made from a float literal under FTZ the inputs would be 0 already.
  constexpr int32_t kDenormalBits = 0x000AE398;  // about 1e-39
  const at::Tensor out = at::full({1 << 20}, kDenormalBits, at::kInt).view(at::kFloat) * 1.0f;
  return out.ne(0).sum().item<double>() / static_cast<double>(out.numel());
}

int64_t operators_dispatched(const std::function<void()>& fn) {
  static thread_local int64_t count = 0;
  count = 0;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++count;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  return count;
}

std::map<int64_t, std::vector<std::string>> traced_steps(const std::filesystem::path& trace) {
  const auto events = nlohmann::json::parse(read_file(trace)).at("traceEvents");
  std::map<int64_t, std::pair<double, double>> ranges;  // step -> [begin, end) in µs
  const std::string prefix = "ProfilerStep#";
  for (const auto& e : events) {
    const std::string name = e.value("name", "");
    if (e.value("ph", "") == "X" && name.rfind(prefix, 0) == 0)
      ranges[std::stoll(name.substr(prefix.size()))] = {e.at("ts").get<double>(),
                                                        e.at("ts").get<double>() + e.at("dur").get<double>()};
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& e : events)
    if (e.value("cat", "") == "cpu_op") ops.emplace_back(e.at("ts").get<double>(), e.value("name", ""));
  std::sort(ops.begin(), ops.end());
  std::map<int64_t, std::vector<std::string>> steps;
  for (const auto& [step, range] : ranges) {
    auto& names = steps[step];
    for (const auto& [ts, name] : ops)
      if (ts >= range.first && ts < range.second) names.push_back(name);
  }
  return steps;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void write_tiny_mnist(const std::filesystem::path& dir, int train, int test, bool gzip, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(0, 60);
  auto make = [&](int n, const std::string& images, const std::string& labels) {
    std::vector<uint8_t> pix(static_cast<size_t>(n) * 28 * 28);
    std::vector<uint8_t> lab(n);
    for (int i = 0; i < n; ++i) {
      int c = static_cast<int>(rng() % 10);
      lab[i] = static_cast<uint8_t>(c);
      for (int y = 0; y < 28; ++y)
        for (int x = 0; x < 28; ++x) {
          int v = noise(rng);
          if (y >= 2 + 2 * c && y < 4 + 2 * c) v += 180;
          pix[(static_cast<size_t>(i) * 28 + y) * 28 + x] = static_cast<uint8_t>(std::min(v, 255));
        }
    }
    std::string ext = gzip ? ".gz" : "";
    data::write_idx((dir / (images + ext)).string(), {n, 28, 28}, pix, gzip);
    data::write_idx((dir / (labels + ext)).string(), {n}, lab, gzip);
  };
  make(train, "train-images-idx3-ubyte", "train-labels-idx1-ubyte");
  make(test, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");
}

void write_tiny_cifar(const std::filesystem::path& dir, int train, int test, bool cifar100, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(0, 80);
  const int classes = cifar100 ? 100 : 10;
  const auto kind = cifar100 ? data::CifarKind::kCifar100 : data::CifarKind::kCifar10;
  auto write = [&](int n, const std::string& name) {
    std::vector<uint8_t> labels(static_cast<size_t>(n));
    std::vector<uint8_t> pixels(static_cast<size_t>(n) * data::kCifarPixels);
    for (int i = 0; i < n; ++i) {
      const int label = static_cast<int>(rng() % static_cast<unsigned>(classes));
      labels[static_cast<size_t>(i)] = static_cast<uint8_t>(label);
      uint8_t* image = pixels.data() + static_cast<size_t>(i) * data::kCifarPixels;
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 32; ++y)
          for (int x = 0; x < 32; ++x) {
            int v = noise(rng);
            if (c == label % 3 && y >= 2 * (label % 14) && y < 2 * (label % 14) + 4) v += 160;
            image[(c * 32 + y) * 32 + x] = static_cast<uint8_t>(std::min(v, 255));
          }
    }
    data::write_cifar((dir / name).string(), kind, labels, pixels);
  };
  if (cifar100) {
    write(train, "train.bin");
    write(test, "test.bin");
    return;
  }
  for (int f = 0; f < 5; ++f) write(train / 5 + (f < train % 5 ? 1 : 0), fmt::format("data_batch_{}.bin", f + 1));
  write(test, "test_batch.bin");
}

bool required_by_environment(const char* variable) {
  const char* value = std::getenv(variable);
  return value != nullptr && std::string(value) == "1";
}

}  // namespace ddplab::testing
