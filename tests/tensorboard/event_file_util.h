// Test helpers shared by the live event-file tests (tests/tensorboard/live_test.cpp,
// tests/runner/live_tensorboard_test.cpp).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ddplab/tensorboard/events.h"
#include "ddplab/tensorboard/export.h"

namespace ddplab::testing {

// The event files (events.out.tfevents.*) directly in `dir`.
inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find("tfevents") != std::string::npos) files.push_back(e.path());
  return files;
}

// The scalar records `ddplab export tensorboard` writes of the run in `dir` now, into `out`
// (emptied first): its file's records but the file_version, the session start and the session end.
inline std::vector<std::string> exported_scalars(const std::filesystem::path& dir, const std::filesystem::path& out) {
  std::filesystem::remove_all(out);
  const auto records = tensorboard::read_records(tensorboard::export_runs({{dir}, out}).files.at(0));
  return {records.begin() + 2, records.end() - 1};
}

}  // namespace ddplab::testing
