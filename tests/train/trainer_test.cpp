#include "ddplab/train/trainer.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ddplab/config/spec.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/train/observer.h"
#include "ddplab/train/options.h"
#include "distributed/ranks.h"
#include "integration/integration_util.h"

namespace ddplab::train {
namespace {

TEST(Trainer, LossFarAboveAUniformGuessHasBlownUp) {
  const double ln10 = std::log(10.0);
  EXPECT_FALSE(loss_has_blown_up(ln10, 10)) << "a uniform guess is where training starts";
  EXPECT_FALSE(loss_has_blown_up(20 * ln10, 10)) << "a bad but recoverable epoch";
  EXPECT_TRUE(loss_has_blown_up(570.6, 10)) << "measured: mnist_cnn at lr 0.5, epoch 1";
  EXPECT_TRUE(loss_has_blown_up(std::numeric_limits<double>::infinity(), 10));
  EXPECT_TRUE(loss_has_blown_up(std::nan(""), 10));
  EXPECT_FALSE(loss_has_blown_up(300, 100)) << "the bound grows with ln(classes): 100 x ln(100) = 460";
}

// Collects what a Trainer reports; thread-safe enough for one observer per rank.
class Recorder : public TrainObserver {
 public:
  void on_step(const StepProgress& p) override { steps.push_back({p.epoch, p.step}); }
  void on_epoch(const rundir::EpochRecord& record) override { epochs.push_back(record); }
  std::vector<std::pair<int, int64_t>> steps;
  std::vector<rundir::EpochRecord> epochs;
};

// Trains `spec` on `ranks` in-process ranks (threads over Gloo), each with a Recorder.
std::vector<std::shared_ptr<Recorder>> train_observed(const config::ExperimentSpec& spec, int ranks) {
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  rundir::RunLog::create(spec, /*overwrite=*/true);
  std::vector<std::shared_ptr<Recorder>> recorders;
  for (int r = 0; r < ranks; ++r) recorders.push_back(std::make_shared<Recorder>());
  testing::run_ranks(ranks, [&](const std::shared_ptr<distributed::Comm>& comm) {
    distributed::World world;
    world.rank = comm->rank;
    world.size = world.local_size = ranks;
    world.local_rank = comm->rank;
    ReplicaOptions options;
    options.run_dir = rundir::run_dir(spec);
    options.data = &data;
    options.comm = ranks > 1 ? comm : nullptr;
    options.observer = recorders[static_cast<size_t>(comm->rank)];
    train_replica(spec, world, options);
  });
  return recorders;
}

TEST(Trainer, ReportsEveryStepOnEveryRankAndEveryEpochOnRankZeroAndPrintsNothingItself) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("observed");
  doc["replicas"]["count"] = 2;
  const config::ExperimentSpec spec = config::resolve(doc);
  ::testing::internal::CaptureStdout();
  const auto recorders = train_observed(spec, 2);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed, "") << "the Trainer printed to stdout itself";

  const int64_t steps = 256 / spec.global_batch;
  for (const auto& rec : recorders) {
    ASSERT_EQ(rec->steps.size(), static_cast<size_t>(spec.epochs * steps));
    EXPECT_EQ(rec->steps.back(), std::make_pair(spec.epochs - 1, steps - 1));
  }
  EXPECT_TRUE(recorders[1]->epochs.empty()) << "only rank 0 reports epochs";
  const auto written = testing::read_records(rundir::run_dir(spec));
  ASSERT_EQ(recorders[0]->epochs.size(), written.size());
  for (size_t e = 0; e < written.size(); ++e) {
    EXPECT_EQ(recorders[0]->epochs[e].epoch, written[e]["epoch"].get<int>());
    EXPECT_EQ(recorders[0]->epochs[e].test_acc, written[e]["test_acc"].get<double>()) << "the record it wrote";
  }
}

}  // namespace
}  // namespace ddplab::train
