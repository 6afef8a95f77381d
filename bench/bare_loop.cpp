// The limit for ddplab's single-replica training speed: forward, backward and SGD step of a model
// on batches already in memory as normalized float tensors; no data loading, no communication,
// no metrics. Same model code and thread count as ddplab.
//
//   build/bin/bare_loop [model=mnist_cnn] [batch=64] [steps=300] [threads=cores] [device=cpu|cuda] [warmup=20]
//                       [trace|-] [eager|graph]
// Runs `warmup` steps, then times `steps` more (bench/compare.sh gives both one epoch's steps, as
// it times ddplab's and the peer's second epoch). Prints one line: "bare_loop model=... batch=...
// threads=... device=... mode=... train_s=... images_per_s=... train_start_unix=...": train_s from
// the first warm-up step to the last step, images_per_s over the timed steps, train_start_unix the
// Unix time of the first warm-up step (bench/compare.sh: the seconds from the process's start).
// With a `trace` file, 20 more steps are then recorded there as ddplab's log.profile_steps records
// its own (bench/step_profile.py compares them).
//
// `graph` (CUDA builds, device cuda): the step (forward, loss, backward, SGD) is captured once in a
// CUDA graph (runtime::StepGraph, as ddplab's replicas.cuda_graph captures its own) after 3 eager
// steps on the graph's stream, as torch.cuda.graph's whole-network capture does, and every step
// replays it after copying its batch into the graph's input tensors: the host then launches one
// graph per step instead of each kernel. What a graph buys the bare loop, to set beside what it
// buys ddplab (docs/performance.md, "A CUDA graph of the step"); the warm-up counts the capture.
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/models/models.h"
#include "ddplab/runtime/device.h"
#include "ddplab/runtime/step_profiler.h"

namespace {

struct Loop {
  std::shared_ptr<ddplab::models::Model> model;
  std::unique_ptr<torch::optim::SGD> sgd;
  std::vector<at::Tensor> xs, ys;  // a pool of random batches, cycled

  void step(const at::Tensor& x, const at::Tensor& y) {
    auto loss = torch::cross_entropy_loss(model->forward(x), y);
    loss.backward();
    sgd->step();
  }
};

// Returns the graphed step: 3 eager steps on the graph's stream, then the step captured; each
// call copies batch i into the graph's inputs and replays it.
std::function<void(int)> capture(Loop& loop, ddplab::runtime::StepGraph& graph) {
  if (!graph.captures()) throw std::runtime_error("mode graph needs a CUDA build of LibTorch and device cuda");
  auto x = loop.xs[0].clone(), y = loop.ys[0].clone();
  for (int i = 0; i < 3; ++i) {
    loop.sgd->zero_grad();
    loop.step(x, y);
  }
  // The gradients are made inside the capture, in the graph's memory, so replays write them there.
  loop.sgd->zero_grad();
  graph.capture([&] {
    loop.step(x, y);
    return std::vector<at::Tensor>{};
  });
  return [&loop, &graph, x, y](int i) mutable {
    x.copy_(loop.xs[i % loop.xs.size()], /*non_blocking=*/true);
    y.copy_(loop.ys[i % loop.ys.size()], /*non_blocking=*/true);
    graph.replay();
  };
}

int run(int argc, char** argv) {
  std::string model_name = argc > 1 ? argv[1] : "mnist_cnn";
  int64_t batch = argc > 2 ? std::stoll(argv[2]) : 64;
  int steps = argc > 3 ? std::stoi(argv[3]) : 300;
  int threads = argc > 4 ? std::stoi(argv[4]) : static_cast<int>(std::thread::hardware_concurrency());
  const std::string device_name = argc > 5 ? argv[5] : "cpu";
  const int warmup = argc > 6 ? std::stoi(argv[6]) : 20;
  const std::string trace = argc > 7 && std::string(argv[7]) != "-" ? argv[7] : "";
  const std::string mode = argc > 8 ? argv[8] : "eager";
  if (mode != "eager" && mode != "graph") {
    fmt::print(stderr, "bare_loop: mode must be eager or graph, got {}\n", mode);
    return 2;
  }
  if (mode == "graph" && device_name != "cuda") {
    fmt::print(stderr, "bare_loop: mode graph needs device cuda, got {}\n", device_name);
    return 2;
  }
  const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
  at::set_num_threads(threads);
  torch::manual_seed(1);
  ddplab::models::ModelOptions spec;
  spec.name = model_name;
  Loop loop;
  loop.model = ddplab::models::make_model(spec, {});
  loop.model->to(device);
  loop.sgd =
      std::make_unique<torch::optim::SGD>(loop.model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const int pool = 16;
  for (int i = 0; i < pool; ++i) {
    loop.xs.push_back(torch::randn({batch, 1, 28, 28}, device));
    loop.ys.push_back(torch::randint(0, 10, {batch}, torch::TensorOptions(torch::kLong).device(device)));
  }
  loop.model->train();
  const auto first = std::chrono::steady_clock::now();
  const auto first_unix = std::chrono::system_clock::now().time_since_epoch();
  std::function<void(int)> step = [&](int i) {
    loop.sgd->zero_grad();
    loop.step(loop.xs[i % pool], loop.ys[i % pool]);
  };
  std::optional<ddplab::runtime::StepGraph> graph;  // its stream is current while it lives
  if (mode == "graph") step = capture(loop, graph.emplace(device));
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  for (int i = 0; i < warmup; ++i) step(i);
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step(i);
  sync();
  const auto end = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(end - start).count();
  fmt::print(
      "bare_loop model={} batch={} threads={} device={} mode={} train_s={:.3f} images_per_s={:.1f} "
      "train_start_unix={:.3f}\n",
      model_name, batch, threads, device_name, mode, std::chrono::duration<double>(end - first).count(),
      steps * batch / s, std::chrono::duration<double>(first_unix).count());
  if (trace.empty()) return 0;
  const int traced = 20;
  ddplab::runtime::StepProfiler profiler(0, traced, device, trace);
  for (int i = 0; i < traced; ++i) {
    profiler.begin_step(i);
    step(i);
    profiler.end_step(i);
  }
  return 0;
}

}  // namespace

// A failure (a capture CUDA refuses, a device that is not there) is one line on stderr and exit 1;
// an argument that is not a number, exit 2.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const c10::Error& e) {
    fmt::print(stderr, "bare_loop: {}\n", e.what_without_backtrace());
    return 1;
  } catch (const std::logic_error& e) {  // std::stoi's invalid_argument, out_of_range
    fmt::print(stderr,
               "bare_loop: a number argument is not a number ({}); usage: bare_loop [model] [batch] [steps] [threads] "
               "[cpu|cuda] [warmup] [trace|-] [eager|graph]\n",
               e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bare_loop: {}\n", e.what());
    return 1;
  }
}
