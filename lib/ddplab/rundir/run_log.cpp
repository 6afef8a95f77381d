#include "ddplab/rundir/run_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <limits>
#include <string_view>
#include <thread>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddplab/base/error.h"
#include "ddplab/base/version.h"
#include "ddplab/config/defaults.h"
#include "ddplab/config/field_roles.h"
#include "ddplab/config/sweep.h"
#include "ddplab/rundir/inputs.h"
#include "ddplab/rundir/run_reader.h"

namespace ddplab::rundir {
namespace fs = std::filesystem;

namespace {
nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

// The readers of EpochRecord::from_json: each names the field and what it expected.
std::string shown(const nlohmann::json& v) {
  const std::string text = v.dump();
  return text.size() > 40 ? fmt::format("{}...", text.substr(0, 40)) : text;
}

const nlohmann::json& required(const nlohmann::json& j, const char* key, const char* expected) {
  const auto it = j.find(key);
  if (it == j.end()) throw Error(fmt::format("{}: missing (expected {})", key, expected));
  return *it;
}

template <typename Int>
Int integer_value(const nlohmann::json& v, const char* key) {
  if (!v.is_number_integer()) throw Error(fmt::format("{}: expected an integer, got {}", key, shown(v)));
  const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max())
                                           : v.get<int64_t>() >= std::numeric_limits<Int>::min() &&
                                                 v.get<int64_t>() <= std::numeric_limits<Int>::max();
  if (!fits)
    throw Error(fmt::format("{}: expected an integer that fits in {} bits, got {}", key, 8 * sizeof(Int), shown(v)));
  return static_cast<Int>(v.get<int64_t>());
}

template <typename Int>
Int integer_field(const nlohmann::json& j, const char* key) {
  return integer_value<Int>(required(j, key, "an integer"), key);
}

// null stands for a non-finite value (to_json cannot write NaN or infinity).
double number_field(const nlohmann::json& j, const char* key) {
  const auto& v = required(j, key, "a number");
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!v.is_number()) throw Error(fmt::format("{}: expected a number, got {}", key, shown(v)));
  return v.get<double>();
}

std::optional<double> optional_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Error(fmt::format("{}: expected a number or null, got {}", key, shown(*it)));
  return it->get<double>();
}

std::vector<std::string> string_array_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return {};
  const bool strings =
      it->is_array() && std::all_of(it->begin(), it->end(), [](const auto& v) { return v.is_string(); });
  if (!strings) throw Error(fmt::format("{}: expected an array of strings, got {}", key, shown(*it)));
  return it->get<std::vector<std::string>>();
}
}  // namespace

nlohmann::json EpochRecord::to_json() const {
  nlohmann::json j = plain_json();
  if (!val_loss) j.erase("val_loss");
  if (!val_acc) j.erase("val_acc");
  if (!audit_warnings.empty()) j["audit_warnings"] = audit_warnings;
  return j;
}

nlohmann::json EpochRecord::plain_json() const {
  return {{"epoch", epoch},
          {"step", step},
          {"lr", lr},
          {"train_loss", train_loss},
          {"train_acc", train_acc},
          {"test_loss", test_loss},
          {"test_acc", test_acc},
          {"epoch_s", epoch_s},
          {"wall_s", wall_s},
          {"images_per_s", images_per_s},
          {"comm_wait_s", comm_wait_s},
          {"grad_norm", grad_norm},
          {"grad_noise_scale", optional_json(grad_noise_scale)},
          {"gns_trace_ema", optional_json(gns_trace_ema)},
          {"gns_grad_sq_ema", optional_json(gns_grad_sq_ema)},
          {"comm_bytes", comm_bytes ? nlohmann::json(*comm_bytes) : nlohmann::json()},
          {"replica_drift", optional_json(replica_drift)},
          {"replicas", replicas},
          {"global_batch", global_batch},
          {"host_cpu_wait_pct", optional_json(host_cpu_wait_pct)},
          {"host_steal_pct", optional_json(host_steal_pct)},
          {"val_loss", optional_json(val_loss)},
          {"val_acc", optional_json(val_acc)}};
}

EpochRecord EpochRecord::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(fmt::format("expected a JSON object (an epoch record), got {}", shown(j)));
  EpochRecord r;
  r.epoch = integer_field<int>(j, "epoch");
  r.step = integer_field<int64_t>(j, "step");
  r.lr = number_field(j, "lr");
  r.train_loss = number_field(j, "train_loss");
  r.train_acc = number_field(j, "train_acc");
  r.test_loss = number_field(j, "test_loss");
  r.test_acc = number_field(j, "test_acc");
  r.epoch_s = number_field(j, "epoch_s");
  r.wall_s = number_field(j, "wall_s");
  r.images_per_s = number_field(j, "images_per_s");
  r.comm_wait_s = number_field(j, "comm_wait_s");
  r.grad_norm = number_field(j, "grad_norm");
  r.grad_noise_scale = optional_field(j, "grad_noise_scale");
  r.gns_trace_ema = optional_field(j, "gns_trace_ema");
  r.gns_grad_sq_ema = optional_field(j, "gns_grad_sq_ema");
  const auto bytes = j.find("comm_bytes");  // null as to_json writes an unknown count
  r.comm_bytes = bytes == j.end() || bytes->is_null()
                     ? std::nullopt
                     : std::optional<int64_t>(integer_value<int64_t>(*bytes, "comm_bytes"));
  r.replica_drift = optional_field(j, "replica_drift");
  r.replicas = integer_field<int>(j, "replicas");
  r.global_batch = integer_field<int64_t>(j, "global_batch");
  r.host_cpu_wait_pct = optional_field(j, "host_cpu_wait_pct");
  r.host_steal_pct = optional_field(j, "host_steal_pct");
  r.val_loss = optional_field(j, "val_loss");
  r.val_acc = optional_field(j, "val_acc");
  r.audit_warnings = string_array_field(j, "audit_warnings");
  return r;
}

nlohmann::json StepRecord::to_json() const {
  nlohmann::json j = {{"step", step},       {"epoch", epoch},           {"interval_steps", interval_steps},
                      {"lr", lr},           {"train_loss", train_loss}, {"train_acc", train_acc},
                      {"samples", samples}, {"elapsed_s", elapsed_s}};
  if (eval_loss) j["eval_loss"] = *eval_loss;
  if (eval_acc) j["eval_acc"] = *eval_acc;
  return j;
}

StepRecord StepRecord::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(fmt::format("expected a JSON object (a step record), got {}", shown(j)));
  StepRecord r;
  r.step = integer_field<int64_t>(j, "step");
  r.epoch = number_field(j, "epoch");
  r.interval_steps = integer_field<int64_t>(j, "interval_steps");
  r.lr = number_field(j, "lr");
  r.train_loss = number_field(j, "train_loss");
  r.train_acc = number_field(j, "train_acc");
  r.samples = integer_field<int64_t>(j, "samples");
  r.elapsed_s = number_field(j, "elapsed_s");
  r.eval_loss = optional_field(j, "eval_loss");
  r.eval_acc = optional_field(j, "eval_acc");
  return r;
}

std::vector<std::string> EpochRecord::csv_columns() {
  return {"epoch",
          "step",
          "lr",
          "train_loss",
          "train_acc",
          "test_loss",
          "test_acc",
          "epoch_s",
          "wall_s",
          "images_per_s",
          "comm_wait_s",
          "grad_norm",
          "grad_noise_scale",
          "gns_trace_ema",
          "gns_grad_sq_ema",
          "comm_bytes",
          "replica_drift",
          "replicas",
          "global_batch",
          "host_cpu_wait_pct",
          "host_steal_pct",
          "val_loss",
          "val_acc"};
}

const std::vector<std::string>& EpochRecord::machine_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> out;
    for (const auto& c : csv_columns()) {
      const std::string_view name = c;
      const bool seconds = name.size() > 2 && name.substr(name.size() - 2) == "_s";
      if (seconds || name.substr(0, 5) == "host_") out.push_back(c);
    }
    return out;
  }();
  return fields;
}

std::string EpochRecord::csv_row() const {
  const auto j = plain_json();
  const auto columns = csv_columns();
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ',';
    const auto& v = j.at(columns[i]);
    // 10 significant digits, as an ostream of precision 10 writes them (%g style).
    if (v.is_number_float())
      fmt::format_to(std::back_inserter(out), "{:.10g}", v.get<double>());
    else if (!v.is_null())
      out += v.dump();
  }
  return out;
}

std::string run_id(const config::ExperimentSpec& spec) {
  return spec.run_id.empty() ? fmt::format("seed={}", spec.seed) : spec.run_id;
}

fs::path experiment_dir(const config::ExperimentSpec& spec) { return fs::path(spec.output) / spec.name; }

fs::path run_dir(const config::ExperimentSpec& spec) { return experiment_dir(spec) / run_id(spec); }

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

void append_line(const fs::path& file, const std::string& line) { append_bytes(file, fmt::format("{}\n", line)); }

void append_bytes(const fs::path& file, const std::string& bytes) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for append: {}", file.string(), std::strerror(errno)));
  struct stat st{};
  const bool sized = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const int err = write_all(fd, bytes);
  // A line cut short would corrupt the file for every later reader (resume, reports): cut it off.
  const bool restored = err != 0 && sized && ::ftruncate(fd, st.st_size) == 0;
  ::close(fd);
  if (err != 0)
    throw Error(fmt::format("{}: write failed: {}{}", file.string(), std::strerror(err),
                            restored ? " (the file is left as it was)" : ""));
}

void write_file_atomic(const fs::path& file, const std::string& text) {
  const fs::path tmp = fmt::format("{}.tmp.{}", file.string(), ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot create: {}", tmp.string(), std::strerror(errno)));
  int err = write_all(fd, text);  // fsyncs: the rename must not publish data still in the page cache
  ::close(fd);
  if (err == 0 && std::rename(tmp.c_str(), file.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: write failed: {} (the previous version is kept)", file.string(), std::strerror(err)));
  }
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw Error(fmt::format("{}: cannot read", file.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", file.string(), config::json_message(e)));
  }
}

nlohmann::json read_manifest(const fs::path& dir) {
  const fs::path file = manifest_file(dir);
  auto manifest = read_json(file);
  if (!manifest.is_object() || (manifest.contains("status") && !manifest["status"].is_string()) ||
      (manifest.contains("checkpoint") && !manifest["checkpoint"].is_object()))
    throw Error(
        fmt::format("{}: not a ddplab manifest (expected a JSON object with a string \"status\"), got {}; "
                    "remove the run directory, or pass --force to replace it",
                    file.string(), manifest.dump().substr(0, 80)));
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
    case RunStatus::kCollapsed:
      return "collapsed";
  }
  return "unknown";
}

std::optional<RunStatus> parse_status(const std::string& text) {
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kDone, RunStatus::kFailed, RunStatus::kInterrupted,
                      RunStatus::kDiverged, RunStatus::kCollapsed})
    if (text == name(s)) return s;
  return std::nullopt;
}

std::optional<RunStatus> read_status(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(manifest_file(dir), ec)) return std::nullopt;
  return parse_status(read_manifest(dir).value("status", ""));
}

std::string utc_now() { return utc_text(std::chrono::system_clock::now()); }

std::string utc_text(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", tm, static_cast<int>(ms % 1000));
}

std::optional<double> manifest_time(const nlohmann::json& manifest, const char* key) {
  const auto it = manifest.is_object() ? manifest.find(key) : manifest.end();
  if (it == manifest.end() || !it->is_string()) return std::nullopt;
  const std::string text = it->get<std::string>();
  std::tm tm{};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0, scale = 1;
  if (*rest == '.' && std::isdigit(static_cast<unsigned char>(rest[1])))
    while (std::isdigit(static_cast<unsigned char>(*++rest))) fraction += (*rest - '0') * (scale /= 10);
  if (std::string_view(rest) != "Z") return std::nullopt;
  return static_cast<double>(::timegm(&tm)) + fraction;
}

namespace {
std::string hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}
}  // namespace

nlohmann::json effective_spec(const nlohmann::json& resolved) {
  nlohmann::json j = config::fields_kept(resolved, config::in_identity);
  nlohmann::json bugs = nlohmann::json::array();
  if (j.contains("debug") && j["debug"].is_object()) {
    const nlohmann::json fault = j["debug"].value("fault", nlohmann::json("none"));
    // fields_kept has taken out the drills (the schema's launcher_values of debug.fault).
    for (const auto& f : fault.is_array() ? fault : nlohmann::json::array({fault}))
      if (config::parse_setting<config::Fault>(f.get<std::string>(), "/debug/fault") != config::Fault::kNone)
        bugs.push_back(f);
    std::sort(bugs.begin(), bugs.end());
    j["debug"] = {{"bugs", bugs}, {"audits", j["debug"].value("audits", nlohmann::json())}};
  }
  return j;
}

namespace {
// spec_changes with the manifest of `dir` already read (null: none).
std::vector<std::string> changes_since(const fs::path& dir, const config::ExperimentSpec& spec,
                                       const nlohmann::json& manifest) {
  std::error_code ec;
  if (!fs::exists(spec_file(dir), ec)) return {};
  auto changes = config::resolved_differences(effective_spec(config::upgraded_spec(read_json(spec_file(dir)))),
                                              effective_spec(config::upgraded_spec(spec.resolved)));
  const auto recorded = manifest.is_object() ? manifest.value("inputs", nlohmann::json()) : nlohmann::json();
  if (!recorded.is_object()) return changes;  // written before the inputs were recorded
  for (auto& line : input_changes(recorded, input_hashes(spec))) changes.push_back(std::move(line));
  return changes;
}
}  // namespace

std::vector<std::string> spec_changes(const fs::path& dir, const config::ExperimentSpec& spec) {
  std::error_code ec;
  if (!fs::exists(spec_file(dir), ec)) return {};
  return changes_since(dir, spec, fs::exists(manifest_file(dir), ec) ? read_manifest(dir) : nlohmann::json());
}

RunLog RunLog::create(const config::ExperimentSpec& spec, bool overwrite) {
  fs::path dir = run_dir(spec);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create run directory: {}", dir.string(), ec.message()));
  if (fs::exists(epochs_file(dir))) {
    if (!overwrite) {
      const auto changes = spec_changes(dir, spec);
      throw Error(fmt::format(
          "{}: run directory already holds a run ({}) of {}; pass --force to replace it", dir.string(),
          epochs_file(dir).filename().string(),
          changes.empty() ? "the same spec" : fmt::format("a different spec ({})", fmt::join(changes, "; "))));
    }
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (is_launcher_file(entry.path())) continue;  // a SLURM job's record and inputs outlive its start
      fs::remove_all(entry.path(), ec);
      if (ec)
        throw Error(
            fmt::format("{}: cannot remove it to replace the run (--force): {}", entry.path().string(), ec.message()));
    }
  }
  RunLog run(dir);
  write_file_atomic(spec_file(dir), fmt::format("{}\n", spec.resolved.dump(2)));
  nlohmann::json manifest = {{"ddplab", {{"version", version()}, {"git_sha", git_sha()}}},
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
                             {"inputs", input_hashes(spec)},
                             {"start", utc_now()},
                             {"end", nullptr},
                             {"status", name(RunStatus::kRunning)}};
  write_file_atomic(manifest_file(dir), fmt::format("{}\n", manifest.dump(2)));
  // Replace, not append: a directory reused without epochs.jsonl (a run that never finished an
  // epoch) may still hold an epochs.csv with a header.
  write_file_atomic(epochs_csv_file(dir), fmt::format("{}\n", fmt::join(EpochRecord::csv_columns(), ",")));
  return run;
}

RunLog RunLog::open(const fs::path& dir) {
  if (!fs::exists(manifest_file(dir)))
    throw Error(fmt::format("{}: not a run directory (no {})", dir.string(), manifest_file(dir).filename().string()));
  return RunLog(dir);
}

namespace {
// The manifest of `dir` when it holds a resumable run (holds_resumable_run), else nothing.
std::optional<nlohmann::json> resumable_manifest(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(manifest_file(dir), ec) || !fs::exists(checkpoint_file(dir), ec) || !fs::exists(spec_file(dir), ec))
    return std::nullopt;
  auto manifest = read_manifest(dir);
  const auto status = parse_status(manifest.value("status", ""));
  if (!status.has_value() || is_finished(*status) || !CheckpointMark::of(manifest).has_value()) return std::nullopt;
  return manifest;
}
}  // namespace

bool holds_resumable_run(const fs::path& dir) { return resumable_manifest(dir).has_value(); }

namespace {
// Keeps the step records of `file` up to global step `last` (the checkpoint's): the steps after
// it run again. A line that is not a record (a torn write) ends what is kept.
void keep_steps_through(const fs::path& file, int64_t last) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  std::ifstream in(file);
  std::string line, text;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() > last)
      break;
    fmt::format_to(std::back_inserter(text), "{}\n", line);
  }
  write_file_atomic(file, text);
}

// epochs.csv made anew from the records epochs.jsonl keeps: a run begun before a column existed
// goes on under today's header instead of appending rows longer than its own. A record that does
// not read (run_reader.h) would go missing from the CSV: the resume refuses.
void rewrite_epochs_csv(const fs::path& dir) {
  std::vector<std::string> notes;
  const auto records = read_epoch_records(dir, notes);
  if (!notes.empty()) throw Error(fmt::format("{}; cannot resume over it", notes.front()));
  std::string text = fmt::format("{}\n", fmt::join(EpochRecord::csv_columns(), ","));
  for (const auto& r : records) fmt::format_to(std::back_inserter(text), "{}\n", r.csv_row());
  write_file_atomic(epochs_csv_file(dir), text);
}
}  // namespace

nlohmann::json CheckpointMark::to_json() const {
  return {{"epochs_done", epochs_done},
          {"step_in_epoch", step_in_epoch},
          {"global_step", global_step},
          {"records", records},
          {"time", time}};
}

std::optional<CheckpointMark> CheckpointMark::of(const nlohmann::json& manifest) {
  if (!manifest.contains("checkpoint") || !manifest["checkpoint"].is_object()) return std::nullopt;
  const auto& c = manifest["checkpoint"];
  return CheckpointMark{c.value("epochs_done", int64_t{0}), c.value("step_in_epoch", int64_t{0}),
                        c.value("global_step", int64_t{0}), c.value("records", int64_t{0}),
                        c.value("time", std::string())};
}

std::optional<RunLog> RunLog::resume(const config::ExperimentSpec& spec, const std::string& reason) {
  fs::path dir = run_dir(spec);
  const auto read = resumable_manifest(dir);  // manifest.json read once for the whole resume
  if (!read) return std::nullopt;
  const nlohmann::json& manifest = *read;
  const std::string status = manifest["status"].get<std::string>();
  if (const auto changes = changes_since(dir, spec, manifest); !changes.empty())
    throw Error(fmt::format("{}: holds an unfinished run of a different spec ({}); pass --force to replace it",
                            dir.string(), fmt::join(changes, "; ")));
  const CheckpointMark mark = CheckpointMark::of(manifest).value();  // resumable_manifest: there is one
  const int64_t keep = mark.records;
  auto keep_lines = [&](const fs::path& file, int64_t n) {
    std::ifstream in(file);
    std::string line, text;
    for (int64_t i = 0; i < n && std::getline(in, line); ++i) fmt::format_to(std::back_inserter(text), "{}\n", line);
    write_file_atomic(file, text);
  };
  keep_lines(epochs_file(dir), keep);
  rewrite_epochs_csv(dir);
  keep_steps_through(steps_file(dir), mark.global_step);
  auto restarts = manifest.value("restarts", nlohmann::json::array());
  restarts.push_back({{"time", utc_now()},
                      {"reason", reason},
                      {"previous_status", status},
                      {"from_epochs_done", mark.epochs_done},
                      {"from_global_step", mark.global_step}});
  RunLog run(dir);
  run.update_manifest(
      {{"status", name(RunStatus::kRunning)}, {"end", nullptr}, {"message", nullptr}, {"restarts", restarts}});
  return run;
}

std::optional<EpochRecord> last_epoch_record(const fs::path& dir) {
  std::vector<std::string> notes;
  auto records = read_epoch_records(dir, notes);
  if (records.empty()) return std::nullopt;
  return std::move(records.back());
}

void RunLog::append(const EpochRecord& record) const {
  append_line(epochs_file(dir_), record.to_json().dump());
  append_line(epochs_csv_file(dir_), record.csv_row());
}

void RunLog::append_steps(const std::vector<StepRecord>& records) const {
  if (records.empty()) return;
  std::string text;
  for (size_t i = 0; i < records.size(); ++i)
    fmt::format_to(std::back_inserter(text), "{}{}", i > 0 ? "\n" : "", records[i].to_json().dump());
  append_line(steps_file(dir_), text);
}

void RunLog::update_manifest(const nlohmann::json& fields) const {
  auto manifest = read_manifest(dir_);
  manifest.merge_patch(fields);
  write_file_atomic(manifest_file(dir_), fmt::format("{}\n", manifest.dump(2)));
}

void RunLog::finish(RunStatus status, const std::string& message) const {
  nlohmann::json fields = {{"status", name(status)}, {"end", utc_now()}};
  if (!message.empty()) fields["message"] = message;
  update_manifest(fields);
}

}  // namespace ddplab::rundir
