#include "ddplab/rundir/inputs.h"

#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/sha256.h"
#include "ddplab/config/datasets.h"

namespace ddplab::rundir {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> input_files(const config::ExperimentSpec& spec) {
  std::vector<fs::path> files = config::dataset_files_read(spec.dataset.name, spec.dataset.root);
  if (!spec.model.torchscript.empty()) files.emplace_back(spec.model.torchscript);
  return files;
}

// A sweep compares every run's directory with the same files: each is hashed once.
std::optional<std::string> cached_hash(const fs::path& file) {
  using Key = std::tuple<std::string, uintmax_t, fs::file_time_type>;
  static std::map<Key, std::string> hashes;
  std::error_code ec;
  const Key key{fs::absolute(file, ec).string(), fs::file_size(file, ec), fs::last_write_time(file, ec)};
  if (ec) return std::nullopt;
  if (const auto it = hashes.find(key); it != hashes.end()) return it->second;
  try {
    return hashes[key] = sha256_file(file);
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

nlohmann::json input_hashes(const config::ExperimentSpec& spec) {
  nlohmann::json hashes = nlohmann::json::object();
  for (const auto& file : input_files(spec))
    if (const auto hash = cached_hash(file)) hashes[file.string()] = *hash;
  return hashes;
}

std::vector<std::string> input_changes(const nlohmann::json& recorded, const nlohmann::json& now) {
  std::vector<std::string> lines;
  const auto hash_in = [](const nlohmann::json& hashes, const std::string& path) {
    const auto it = hashes.find(path);
    return it != hashes.end() && it->is_string() ? it->get<std::string>() : std::string("(not read)");
  };
  for (const auto& [path, hash] : now.items())
    if (const std::string before = hash_in(recorded, path); before != hash_in(now, path))
      lines.push_back(fmt::format("{}: content changed, sha256 {} -> {}", path, before, hash_in(now, path)));
  return lines;
}

}  // namespace ddplab::rundir
