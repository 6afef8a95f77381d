#include "ddplab/tensorboard/event_file.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/tensorboard/events.h"

namespace ddplab::tensorboard {

std::string event_file_name(double wall_time, const std::string& host) {
  return fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(std::floor(wall_time)), host);
}

EventFile::EventFile(double wall_time) { add(file_version_event(wall_time)); }

void EventFile::add(const std::string& event) { bytes_ += frame_record(event); }

void EventFile::add_scalar(double wall_time, int64_t step, const std::string& tag, double value) {
  add(scalar_event(wall_time, step, tag, static_cast<float>(value)));
}

void EventFile::write(const std::filesystem::path& file) const {
  // The temp name holds no "tfevents", so TensorBoard does not read it while it is written.
  const std::filesystem::path temp = file.parent_path() / ".ddplab-export.tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
    out.close();
    if (!out) throw Error(fmt::format("{}: cannot write ({})", temp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(temp, file, ec);
  if (ec) throw Error(fmt::format("{}: cannot write ({})", file.string(), ec.message()));
}

}  // namespace ddplab::tensorboard
