#include "ddplab/rundir/run_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "ddplab/base/error.h"
#include "ddplab/base/version.h"

namespace ddplab::rundir {
namespace fs = std::filesystem;

namespace {
nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }
}  // namespace

nlohmann::json EpochRecord::to_json() const {
  return {{"epoch", epoch},           {"step", step},
          {"lr", lr},                 {"train_loss", train_loss},
          {"train_acc", train_acc},   {"test_loss", test_loss},
          {"test_acc", test_acc},     {"epoch_s", epoch_s},
          {"wall_s", wall_s},         {"images_per_s", images_per_s},
          {"comm_wait_s", comm_wait_s}, {"grad_norm", grad_norm},
          {"grad_noise_scale", optional_json(grad_noise_scale)},
          {"gns_trace_ema", optional_json(gns_trace_ema)},
          {"gns_grad_sq_ema", optional_json(gns_grad_sq_ema)},
          {"comm_bytes", comm_bytes},
          {"replica_drift", optional_json(replica_drift)},
          {"replicas", replicas},     {"global_batch", global_batch}};
}

std::vector<std::string> EpochRecord::csv_columns() {
  return {"epoch",   "step",   "lr",           "train_loss",  "train_acc", "test_loss",
          "test_acc", "epoch_s", "wall_s", "images_per_s", "comm_wait_s", "grad_norm",
          "grad_noise_scale", "gns_trace_ema", "gns_grad_sq_ema", "comm_bytes", "replica_drift",
          "replicas", "global_batch"};
}

std::string EpochRecord::csv_row() const {
  auto j = to_json();
  std::ostringstream out;
  out.precision(10);
  bool first = true;
  for (const auto& c : csv_columns()) {
    if (!first) out << ',';
    first = false;
    const auto& v = j.at(c);
    if (v.is_number_float()) out << v.get<double>(); else if (!v.is_null()) out << v.dump();
  }
  return out.str();
}

std::string run_id(const config::ExperimentSpec& spec) {
  return spec.run_id.empty() ? "seed=" + std::to_string(spec.seed) : spec.run_id;
}

fs::path run_dir(const config::ExperimentSpec& spec) { return fs::path(spec.output) / spec.name / run_id(spec); }

namespace {

// Writes all of `text` (a full disk or a file-size limit can cut one write() short; the next one
// then reports why), then fsyncs. Returns 0 or the errno of the failure.
int write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return ::fsync(fd) == 0 ? 0 : errno;
}

}  // namespace

void append_line(const fs::path& file, const std::string& line) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(file.string() + ": cannot open for append: " + std::strerror(errno));
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const int err = write_all(fd, line + "\n");
  // A line cut short would corrupt the file for every later reader (resume, reports): cut it off.
  const bool restored = err != 0 && sized && ::ftruncate(fd, st.st_size) == 0;
  ::close(fd);
  if (err != 0)
    throw Error(file.string() + ": write failed: " + std::strerror(err) +
                (restored ? " (the file is left as it was)" : ""));
}

void write_file_atomic(const fs::path& file, const std::string& text) {
  fs::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(tmp.string() + ": cannot create: " + std::strerror(errno));
  int err = write_all(fd, text);  // fsyncs: the rename must not publish data still in the page cache
  ::close(fd);
  if (err == 0 && std::rename(tmp.c_str(), file.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(file.string() + ": write failed: " + std::strerror(err) + " (the previous version is kept)");
  }
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": cannot read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ": malformed JSON: " + config::json_message(e));
  }
}

nlohmann::json read_manifest(const fs::path& dir) {
  const fs::path file = manifest_file(dir);
  auto manifest = read_json(file);
  if (!manifest.is_object() || (manifest.contains("status") && !manifest["status"].is_string()) ||
      (manifest.contains("checkpoint") && !manifest["checkpoint"].is_object()))
    throw Error(file.string() + ": not a ddplab manifest (expected a JSON object with a string \"status\"), got " +
                manifest.dump().substr(0, 80) + "; remove the run directory, or pass --force to replace it");
  return manifest;
}

const char* name(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning:
      return "running";
    case RunStatus::kDone:
      return "done";
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kInterrupted:
      return "interrupted";
    case RunStatus::kDiverged:
      return "diverged";
  }
  return "unknown";
}

std::optional<RunStatus> parse_status(const std::string& text) {
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kDone, RunStatus::kFailed, RunStatus::kInterrupted,
                      RunStatus::kDiverged})
    if (text == name(s)) return s;
  return std::nullopt;
}

std::optional<RunStatus> read_status(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(manifest_file(dir), ec)) return std::nullopt;
  return parse_status(read_manifest(dir).value("status", ""));
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {
std::string hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

RunLog RunLog::create(const config::ExperimentSpec& spec, bool overwrite) {
  fs::path dir = run_dir(spec);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create run directory: " + ec.message());
  if (fs::exists(epochs_file(dir))) {
    if (!overwrite)
      throw Error(dir.string() + ": run directory already holds a run (epochs.jsonl); pass --force to replace it");
    for (const auto& entry : fs::directory_iterator(dir)) {
      fs::remove_all(entry.path(), ec);
      if (ec) throw Error(entry.path().string() + ": cannot remove it to replace the run (--force): " + ec.message());
    }
  }
  RunLog run(dir);
  write_file_atomic(spec_file(dir), spec.resolved.dump(2) + "\n");
  nlohmann::json manifest = {
      {"ddplab", {{"version", version()}, {"git_sha", git_sha()}}},
      {"libtorch", torch_version()},
      {"cuda_build", built_with_cuda()},
      {"compiler", compiler()},
      {"host", hostname()},
      {"cores", std::thread::hardware_concurrency()},
      {"experiment", spec.name},
      {"run_id", run_id(spec)},
      {"replicas", spec.replicas.count},
      {"threads_per_replica", spec.replicas.threads},
      {"device", config::name(spec.replicas.device)},
      {"backend", config::name(spec.replicas.backend)},
      {"start", utc_now()},
      {"end", nullptr},
      {"status", name(RunStatus::kRunning)}};
  write_file_atomic(manifest_file(dir), manifest.dump(2) + "\n");
  std::string header;
  for (const auto& c : EpochRecord::csv_columns()) header += (header.empty() ? "" : ",") + c;
  // Replace, not append: a directory reused without epochs.jsonl (a run that never finished an
  // epoch) may still hold an epochs.csv with a header.
  write_file_atomic(epochs_csv_file(dir), header + "\n");
  return run;
}

RunLog RunLog::open(const fs::path& dir) {
  if (!fs::exists(manifest_file(dir))) throw Error(dir.string() + ": not a run directory (no manifest.json)");
  return RunLog(dir);
}

bool holds_resumable_run(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(manifest_file(dir), ec) || !fs::exists(checkpoint_file(dir), ec) ||
      !fs::exists(spec_file(dir), ec))
    return false;
  const auto manifest = read_manifest(dir);
  const auto status = parse_status(manifest.value("status", ""));
  return status.has_value() && !is_finished(*status) && manifest.contains("checkpoint");
}

std::optional<RunLog> RunLog::resume(const config::ExperimentSpec& spec, const std::string& reason) {
  fs::path dir = run_dir(spec);
  if (!holds_resumable_run(dir)) return std::nullopt;
  auto manifest = read_manifest(dir);
  const std::string status = manifest["status"].get<std::string>();
  auto comparable = [](nlohmann::json j) {
    j.erase("debug");
    j.erase("checkpoint");
    if (j.contains("replicas")) j["replicas"].erase("timeout_s");
    return j;
  };
  auto before = comparable(read_json(spec_file(dir)));
  auto now = comparable(spec.resolved);
  if (before != now) {
    auto patch = nlohmann::json::diff(before, now);
    std::string where = patch.empty() ? "" : patch[0].value("path", "");
    throw Error(dir.string() + ": holds an unfinished run of a different spec (it differs at " + where +
                "); pass --force to replace it");
  }
  const int64_t keep = manifest["checkpoint"].value("records", 0);
  auto keep_lines = [&](const fs::path& file, int64_t n) {
    std::ifstream in(file);
    std::string line, text;
    for (int64_t i = 0; i < n && std::getline(in, line); ++i) text += line + "\n";
    write_file_atomic(file, text);
  };
  keep_lines(epochs_file(dir), keep);
  keep_lines(epochs_csv_file(dir), keep + 1);
  auto restarts = manifest.value("restarts", nlohmann::json::array());
  restarts.push_back({{"time", utc_now()},
                      {"reason", reason},
                      {"previous_status", status},
                      {"from_epochs_done", manifest["checkpoint"].value("epochs_done", 0)},
                      {"from_global_step", manifest["checkpoint"].value("global_step", 0)}});
  RunLog run(dir);
  run.update_manifest({{"status", name(RunStatus::kRunning)}, {"end", nullptr}, {"message", nullptr}, {"restarts", restarts}});
  return run;
}

void RunLog::append(const EpochRecord& record) const {
  append_line(epochs_file(dir_), record.to_json().dump());
  append_line(epochs_csv_file(dir_), record.csv_row());
}

void RunLog::update_manifest(const nlohmann::json& fields) const {
  auto manifest = read_manifest(dir_);
  manifest.merge_patch(fields);
  write_file_atomic(manifest_file(dir_), manifest.dump(2) + "\n");
}

void RunLog::finish(RunStatus status, const std::string& message) const {
  nlohmann::json fields = {{"status", name(status)}, {"end", utc_now()}};
  if (!message.empty()) fields["message"] = message;
  update_manifest(fields);
}

}  // namespace ddplab::rundir
