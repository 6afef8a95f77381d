// Console lines of the CLI: say() to stdout, complain() to stderr, each a whole line formatted
// with fmt and flushed at once (as std::endl did), so the lines of the launcher and its workers,
// which share the terminal, keep their order.
#pragma once
#include <cstdio>
#include <utility>

#include <fmt/format.h>

namespace ddplab::runner {

template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stdout, "{}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stdout);
}

template <typename... Args>
void complain(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "{}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
}

}  // namespace ddplab::runner
