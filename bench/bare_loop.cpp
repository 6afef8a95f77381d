// The limit for ddplab's single-replica training speed: forward, backward and SGD step of a model
// on batches already in memory as normalized float tensors; no data loading, no communication,
// no metrics. Same model code and thread count as ddplab.
//
//   build/bin/bare_loop [model=mnist_cnn] [batch=64] [steps=300] [threads=cores] [device=cpu|cuda] [warmup=20] [trace]
// Runs `warmup` steps, then times `steps` more (bench/compare.sh gives both one epoch's steps, as
// it times ddplab's and the peer's second epoch). Prints one line: "bare_loop model=... batch=...
// threads=... device=... train_s=... images_per_s=...": train_s from the first warm-up step to the
// last step, images_per_s over the timed steps. With a `trace` file, 20 more steps are then
// recorded there as ddplab's log.profile_steps records its own (bench/step_profile.py compares them).
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/models/models.h"
#include "ddplab/runtime/step_profiler.h"

int main(int argc, char** argv) {
  std::string model_name = argc > 1 ? argv[1] : "mnist_cnn";
  int64_t batch = argc > 2 ? std::stoll(argv[2]) : 64;
  int steps = argc > 3 ? std::stoi(argv[3]) : 300;
  int threads = argc > 4 ? std::stoi(argv[4]) : static_cast<int>(std::thread::hardware_concurrency());
  const std::string device_name = argc > 5 ? argv[5] : "cpu";
  const int warmup = argc > 6 ? std::stoi(argv[6]) : 20;
  const std::string trace = argc > 7 ? argv[7] : "";
  const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
  at::set_num_threads(threads);
  torch::manual_seed(1);
  ddplab::models::ModelOptions spec;
  spec.name = model_name;
  auto model = ddplab::models::make_model(spec, {});
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const int pool = 16;
  std::vector<at::Tensor> xs, ys;
  for (int i = 0; i < pool; ++i) {
    xs.push_back(torch::randn({batch, 1, 28, 28}, device));
    ys.push_back(torch::randint(0, 10, {batch}, torch::TensorOptions(torch::kLong).device(device)));
  }
  model->train();
  auto step = [&](int i) {
    sgd.zero_grad();
    auto loss = torch::cross_entropy_loss(model->forward(xs[i % pool]), ys[i % pool]);
    loss.backward();
    sgd.step();
  };
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  const auto first = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup; ++i) step(i);
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step(i);
  sync();
  const auto end = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(end - start).count();
  fmt::print("bare_loop model={} batch={} threads={} device={} train_s={:.3f} images_per_s={:.1f}\n", model_name, batch,
             threads, device_name, std::chrono::duration<double>(end - first).count(), steps * batch / s);
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
