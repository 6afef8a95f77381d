#include "ddplab/launch/rank_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace ddplab::launch {
namespace {

// Writes all of `text` to `fd` (EINTR retried); a failed write is dropped: the console or a log
// that cannot be written must not stop the launcher from supervising the ranks.
void write_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

RankOutput::~RankOutput() {
  for (const Stream& s : streams_)
    if (s.fd >= 0) ::close(s.fd);
  for (const int log : logs_) ::close(log);
}

void RankOutput::add(int rank, int out_fd, int err_fd, const std::filesystem::path& log_file) {
  const int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error(fmt::format("{}: cannot open ({})", log_file.string(), std::strerror(errno)));
  logs_.push_back(log);
  for (const int fd : {out_fd, err_fd}) streams_.push_back(Stream{rank, fd, log, {}});
}

void RankOutput::pump(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Stream*> of;
  for (Stream& s : streams_)
    if (s.fd >= 0) {
      fds.push_back({s.fd, POLLIN, 0});
      of.push_back(&s);
    }
  if (fds.empty()) {
    if (timeout_ms > 0) ::poll(nullptr, 0, timeout_ms);
    return;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0) read_from(*of[i]);
}

void RankOutput::drain(int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto open = [&] {
    for (const Stream& s : streams_)
      if (s.fd >= 0) return true;
    return false;
  };
  while (open() && std::chrono::steady_clock::now() < until) pump(20);
  for (Stream& s : streams_) pass_lines(s, /*at_end=*/true);
}

void RankOutput::read_from(Stream& s) {
  char buffer[65536];
  const ssize_t n = ::read(s.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    ::close(s.fd);
    s.fd = -1;
    pass_lines(s, /*at_end=*/true);
    return;
  }
  s.partial.append(buffer, static_cast<size_t>(n));
  pass_lines(s, /*at_end=*/false);
}

void RankOutput::pass_lines(Stream& s, bool at_end) {
  std::string log, console;
  size_t from = 0;
  while (from < s.partial.size()) {
    const size_t newline = s.partial.find('\n', from);
    const size_t rest = s.partial.size() - from;
    if (newline == std::string::npos && !at_end && rest < kLongLine) break;
    const size_t length =
        newline == std::string::npos ? std::min(rest, kLongLine) : std::min(newline - from, kLongLine);
    const std::string line = s.partial.substr(from, length);
    log += line + "\n";
    console += fmt::format("[rank {}] {}\n", s.rank, line);
    from += length + (newline == from + length ? 1 : 0);
  }
  s.partial.erase(0, from);
  write_all(s.log, log);
  write_all(STDOUT_FILENO, console);
}

}  // namespace ddplab::launch
