// The data loader alone: how many training images per second TrainLoader delivers (gather,
// convert, normalize on its background thread) when nothing consumes time between batches.
// Compare with the training images/s of bench/train_throughput.sh: the loader must be >= 20x
// faster, so that prefetching hides it completely.
//
//   build/bin/loader_throughput [dataset_root=/usr/share/datasets/fashion-mnist] [batch=64] [epochs=3] [threads=1]
//                               [augment=none|standard|tf_tutorial]
// Prints one line: "loader_throughput batch=... threads=... images_per_s=...".
#include <chrono>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "ddplab/data/dataset.h"
#include "ddplab/data/loader.h"
#include "ddplab/data/transform.h"

int main(int argc, char** argv) {
  ddplab::data::DatasetOptions spec;
  spec.root = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 64;
  const int epochs = argc > 3 ? std::stoi(argv[3]) : 3;
  const int threads = argc > 4 ? std::stoi(argv[4]) : 1;
  const std::string augment = argc > 5 ? argv[5] : "none";
  at::set_num_threads(threads);
  auto data = ddplab::data::load_dataset(spec);
  ddplab::data::TrainLoader loader(
      data,
      ddplab::data::make_transform(
          ddplab::config::parse_setting<ddplab::config::Augment>(augment, "argument 5 (augment)"), data),
      batch, /*rank=*/0,
      /*world=*/1, /*seed=*/1);
  int64_t images = 0;
  double checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.start_epoch(epoch);
    while (auto b = loader.next()) {
      images += b->y.size(0);
      checksum += b->x.data_ptr<float>()[0];  // touch the batch so nothing is optimized away
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("loader_throughput batch={} threads={} augment={} images_per_s={:.0f} (checksum {:.3f})\n", batch, threads,
             augment, images / s, checksum);
  return 0;
}
