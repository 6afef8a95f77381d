// `ddplab run --tee` (torchrun's --tee): every rank's stdout and stderr come to the launcher
// through pipes; it writes them to the rank's log file (rank-<r>.log, as without --tee) and to its
// own stdout, each line whole and prefixed "[rank <r>] ". One thread (the launcher's loop) writes
// every line with one write, so lines of different ranks never interleave mid-line; a line
// longer than kLongLine bytes is cut into lines of that length.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace ddplab::launch {

class RankOutput {
 public:
  static constexpr size_t kLongLine = 65536;

  RankOutput() = default;
  RankOutput(const RankOutput&) = delete;
  RankOutput& operator=(const RankOutput&) = delete;
  ~RankOutput();  // closes what is still open

  // Takes the read ends of rank `rank`'s stdout and stderr pipes (closed at their end) and
  // writes its lines to `log_file` too (truncated first). Throws std::runtime_error naming the
  // log file when it cannot be opened.
  void add(int rank, int out_fd, int err_fd, const std::filesystem::path& log_file);
  // Waits up to `timeout_ms` for output, then passes on every whole line the pipes hold.
  void pump(int timeout_ms);
  // After the ranks exited: reads every pipe to its end (a last line without '\n' gets one),
  // waiting at most `timeout_ms` in all for a pipe that a child of a rank still holds open.
  void drain(int timeout_ms);

 private:
  struct Stream {
    int rank = 0;
    int fd = -1;          // the pipe's read end; -1 once it ended
    int log = -1;         // the rank's log file (shared by its two streams)
    std::string partial;  // read, not yet a whole line
  };
  void read_from(Stream& s);
  void pass_lines(Stream& s, bool at_end);
  std::vector<Stream> streams_;
  std::vector<int> logs_;
};

}  // namespace ddplab::launch
