// Real ranks in one test process: N threads, each a c10d ProcessGroupGloo rank over 127.0.0.1,
// rendezvous through a TCPStore this helper hosts on a free port (every rank connects as a
// client, as under ddplab's launcher). As PyTorch's own C++ c10d tests do with threads.
#pragma once
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ddplab/distributed/comm.h"
#include "ddplab/distributed/world.h"

namespace ddplab::testing {

// Runs fn(comm) on `n` ranks at once and rethrows the first exception a rank threw.
inline void run_ranks(int n, const std::function<void(const std::shared_ptr<distributed::Comm>&)>& fn,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  int port = 0;
  auto store = distributed::host_store("127.0.0.1", timeout, &port);
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        distributed::World world;
        world.rank = r;
        world.size = n;
        world.local_rank = r;
        world.local_size = n;
        world.master_port = port;
        world.agent_store = true;
        auto comm = distributed::make_comm(world, config::Backend::kGloo, timeout);
        fn(comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace ddplab::testing
