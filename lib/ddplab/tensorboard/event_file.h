// An event file built in memory and written whole (the export, export.h; a live file's start,
// live.h): its first record is the file_version event, then the records added, in the order added.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace ddplab::tensorboard {

// "events.out.tfevents.<whole seconds of wall_time>.<host>": TensorBoard reads the files of a run
// directory whose name holds "tfevents", in name order.
std::string event_file_name(double wall_time, const std::string& host);

class EventFile {
 public:
  // Starts with the file_version event at `wall_time` (seconds since the epoch).
  explicit EventFile(double wall_time);
  // Appends one serialized Event (events.h) as a record.
  void add(const std::string& event);
  // Appends a scalar event; the value is stored as a float, as TensorBoard's simple_value.
  void add_scalar(double wall_time, int64_t step, const std::string& tag, double value);
  const std::string& bytes() const { return bytes_; }
  // Writes the file at `file` (a temp file in its directory renamed over it, so a TensorBoard
  // reading the directory never sees half a file). Throws ddplab::Error naming the file.
  void write(const std::filesystem::path& file) const;

 private:
  std::string bytes_;
};

}  // namespace ddplab::tensorboard
