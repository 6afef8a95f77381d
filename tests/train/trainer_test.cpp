#include "ddplab/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#ifdef DDPLAB_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#endif

#include "ddplab/config/spec.h"
#include "ddplab/distributed/world.h"
#include "ddplab/rundir/run_log.h"
#include "ddplab/runtime/denormal.h"
#include "integration/integration_util.h"
#include "test_util.h"
#include "train/train_ranks.h"

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

// Two replicas simulated in one process: ranks that are threads would share the process's default
// generator (weights and dropout masks drawn in a racy order), one process draws deterministically,
// and its two dropout streams must resume too. (Processes: tests/integration/reliability_test.cpp.)
TEST(Trainer, ACleanStopInsideAnEpochThenResumeGivesTheRecordsOfARunNeverStopped) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("never_stopped");
  doc["replicas"]["count"] = 2;
  doc["replicas"]["mode"] = "simulated";
  doc["model"]["dropout"] = 0.3;
  const config::ExperimentSpec never_stopped = config::resolve(doc);
  train_observed(never_stopped, 1);

  doc["name"] = "stopped";
  // Asked before global step 5 (epoch 2 of 4 steps); the flag is read one step late, so the run
  // stops after step 7, the epoch's third.
  doc["debug"] = {{"fault", "stop"}, {"rank", 0}, {"step", 5}};
  const config::ExperimentSpec stopped = config::resolve(doc);
  const auto first = train_ranks(stopped, 1);
  const auto e = thrown<Interrupted>(first[0]);
  EXPECT_NE(std::string(e.what()).find("after step 7 (epoch 2)"), std::string::npos) << e.what();
  EXPECT_EQ(numeric_records(stopped).size(), 1U) << "epoch 1's record, nothing of epoch 2 yet";

  const auto second = train_ranks(stopped, 1, /*resume=*/true);
  EXPECT_FALSE(second[0].error) << "the resumed attempt finishes";
  EXPECT_EQ(second[0].recorder->steps.front(), std::make_pair(1, int64_t{3})) << "it goes on after the stop's step";
  EXPECT_EQ(numeric_records(stopped), numeric_records(never_stopped));
}

// The manifest's "train_start" is when the training clock (wall_s 0) started, to the millisecond:
// after the run's start, before the clock's end by at least the records' wall_s, and a resumed
// process, whose clock goes on from the checkpoint's wall_s, keeps the first one's.
TEST(Trainer, TheManifestSaysWhenTheTrainingClockStartedAndAResumeKeepsIt) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("clock");
  doc["debug"] = {{"fault", "stop"}, {"rank", 0}, {"step", 5}};
  const config::ExperimentSpec spec = config::resolve(doc);
  const auto first = train_ranks(spec, 1);
  thrown<Interrupted>(first[0]);
  const auto after_first = std::chrono::system_clock::now();
  const auto manifest = rundir::read_manifest(rundir::run_dir(spec));
  const auto start = rundir::manifest_time(manifest, "start"),
             train_start = rundir::manifest_time(manifest, "train_start");
  ASSERT_TRUE(start && train_start) << manifest.dump();
  EXPECT_LE(*start, *train_start);
  const double wall_s = testing::read_records(rundir::run_dir(spec)).back().at("wall_s");
  EXPECT_LE(*train_start + wall_s, std::chrono::duration<double>(after_first.time_since_epoch()).count() + 1e-3);

  const auto second = train_ranks(spec, 1, /*resume=*/true);
  EXPECT_FALSE(second[0].error);
  EXPECT_EQ(rundir::read_manifest(rundir::run_dir(spec)).at("train_start"), manifest.at("train_start"));
}

// replicas.cuda_graph, on a GPU when there is one (steps 4 on captured and replayed), else on the
// CPU (every step run eagerly in the form a capture takes): a clean stop inside an epoch and the
// resume give the records of a run never stopped (Adam's step counts, from which its bias
// corrections are made on the host, go through the checkpoint; the stop's steps run eagerly), and
// the run trains as one without the graph to rounding (the lr meets the update in another order).
TEST(Trainer, ACudaGraphRunStoppedAndResumedGivesTheRecordsOfOneNeverStopped) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);  // 4 steps an epoch
  auto doc = ws.base_spec("eager");
  doc["epochs"] = 4;
  doc["model"]["dropout"] = 0.3;
  doc["optimizer"] = {{"name", "adam"}, {"lr", 0.003}};
  if (torch::cuda::is_available()) doc["replicas"]["device"] = "cuda";
  const config::ExperimentSpec eager = config::resolve(doc);
  train_observed(eager, 1);
  doc["name"] = "graphed";
  doc["replicas"]["cuda_graph"] = true;
  const config::ExperimentSpec graphed = config::resolve(doc);
  const auto notes = train_observed(graphed, 1)[0]->notes;
  const bool said = std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("replicas.cuda_graph on a CPU: nothing is captured") != std::string::npos;
  });
  EXPECT_EQ(said, !torch::cuda::is_available()) << "a CPU run says that nothing is captured";

  doc["name"] = "stopped";
  doc["debug"] = {{"fault", "stop"}, {"rank", 0}, {"step", 5}};  // stops after step 7
  const config::ExperimentSpec stopped = config::resolve(doc);
  thrown<Interrupted>(train_ranks(stopped, 1)[0]);
  const auto second = train_ranks(stopped, 1, /*resume=*/true);
  EXPECT_FALSE(second[0].error) << "the resumed attempt finishes";
  ASSERT_EQ(numeric_records(graphed).size(), 4U);
  EXPECT_EQ(numeric_records(stopped), numeric_records(graphed));

  const auto a = numeric_records(eager), b = numeric_records(graphed);
  for (size_t e = 0; e < a.size(); ++e)
    EXPECT_LT(testing::relative_difference(a[e]["train_loss"], b[e]["train_loss"]), 1e-4) << "epoch " << e + 1;
}

// The manifest holds the lr as the run schedules it: a warmup to epoch 0.5 under a cosine decay
// peaks inside epoch 1, above what any end-of-epoch record samples.
TEST(Trainer, TheManifestHoldsTheLrScheduleWithItsPeakBetweenTheRecords) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("lr");
  doc["schedule"] = {{"scale_rule", "linear"}, {"base_batch", 32}, {"warmup_epochs", 0.5}, {"decay", "cosine"}};
  const config::ExperimentSpec spec = config::resolve(doc);
  train_observed(spec, 1);
  const nlohmann::json lr = rundir::read_manifest(rundir::run_dir(spec))["lr_schedule"];
  EXPECT_DOUBLE_EQ(lr["spec"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(lr["scaled"].get<double>(), 0.1) << "global batch 64 over base 32, linear";
  EXPECT_DOUBLE_EQ(lr["peak_epoch"].get<double>(), 0.5) << "4 steps per epoch: step 2 of epoch 1";
  for (const auto& record : numeric_records(spec)) EXPECT_LT(record["lr"].get<double>(), lr["peak"].get<double>());
}

// dataset.placement "device" makes the batches where the model runs (here the CPU) from the data
// copied there once, augmentation included: the records of the host's batches, and the same
// again for a second run of the seed. With 2 simulated replicas and evaluation points, so that
// shards and the evaluation of both sets go through it.
TEST(Trainer, BatchesMadeOnTheDeviceGiveTheRecordsOfBatchesMadeOnTheHost) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("host");
  doc["replicas"]["count"] = 2;
  doc["replicas"]["mode"] = "simulated";
  doc["dataset"]["augment"] = "standard";
  doc["dataset"]["placement"] = "host";
  doc["dataset"]["validation"] = 32;
  doc["log"]["eval_every_steps"] = 3;
  const config::ExperimentSpec host = config::resolve(doc);
  train_observed(host, 1);
  doc["dataset"]["placement"] = "device";
  doc["name"] = "device";
  const config::ExperimentSpec device = config::resolve(doc);
  train_observed(device, 1);
  doc["name"] = "device_again";
  const config::ExperimentSpec again = config::resolve(doc);
  train_observed(again, 1);

  EXPECT_EQ(rundir::read_manifest(rundir::run_dir(host))["data_placement"], "host");
  EXPECT_EQ(rundir::read_manifest(rundir::run_dir(device))["data_placement"], "device");
  ASSERT_EQ(numeric_records(device).size(), 2U);
  EXPECT_EQ(numeric_records(device), numeric_records(host));
  EXPECT_EQ(numeric_records(again), numeric_records(device));
  EXPECT_EQ(step_lines(device).size(), step_lines(host).size());
}

// log.profile_steps: a trace of the window's global steps, across an epoch's end, with each step's
// forward and optimizer operators in it; the records are those of the run without it.
TEST(Trainer, AProfiledWindowOfStepsIsTracedAndChangesNoRecord) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);  // 4 steps an epoch
  auto doc = ws.base_spec("plain");
  const config::ExperimentSpec plain = config::resolve(doc);
  train_observed(plain, 1);
  doc["name"] = "profiled";
  doc["log"] = {{"profile_steps", 3}, {"profile_from_step", 3}};
  const config::ExperimentSpec profiled = config::resolve(doc);
  const auto recorders = train_observed(profiled, 1);

  EXPECT_EQ(numeric_records(profiled), numeric_records(plain));
  const auto steps = testing::traced_steps(rundir::profile_trace_file(rundir::run_dir(profiled), 0));
  ASSERT_EQ(steps.size(), 3U);
  for (const int64_t step : {3, 4, 5}) {
    ASSERT_EQ(steps.count(step), 1U) << "global step " << step;
    const auto& ops = steps.at(step);
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::addmm"), 2) << "the mlp's two layers, step " << step;
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::_foreach_add_"), 2) << "SGD's momentum update, step " << step;
  }
  EXPECT_TRUE(recorders[0]->notes.empty()) << "the window ended inside the run: nothing to say";
}

#ifdef DDPLAB_WITH_CUDA
// The synchronizing CUDA calls made on this thread while it lives (c10's sync debug mode warns on
// each: a read of a device value, a copy from pageable memory, a device or stream sync; a wait on
// an event, as HostReadback's, is not one).
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : guard_(this) { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN); }
  ~SyncCounter() override { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
  void process(const c10::Warning& warning) override {
    if (warning.msg().find("synchronizing") != std::string::npos) ++count;
  }
  int count = 0;

 private:
  c10::WarningUtils::WarningHandlerGuard guard_;
};

// The synchronizing calls of a one-epoch, one-replica run on the GPU of `train` images, on this thread.
int syncs_of_a_run(const testing::Workspace& ws, int train, const std::string& optimizer,
                   const std::string& placement) {
  auto doc = ws.base_spec(fmt::format("syncs_{}_{}_{}", train, optimizer, placement));
  doc["dataset"]["train_limit"] = train;
  doc["dataset"]["placement"] = placement;
  doc["optimizer"]["name"] = optimizer;
  doc["replicas"]["device"] = "cuda";
  doc["epochs"] = 1;
  const config::ExperimentSpec spec = config::resolve(doc);
  rundir::RunLog::create(spec, /*overwrite=*/true);
  ReplicaOptions options;
  options.run_dir = rundir::run_dir(spec);
  options.observer = std::make_shared<Recorder>();
  SyncCounter syncs;
  train_replica(spec, distributed::World{}, options);
  return syncs.count;
}

// Issue 29: nothing in a step waits for the GPU. A run of twice the steps makes no more
// synchronizing calls than one of half: those there are belong to the epoch's start and end.
TEST(Trainer, OnCudaAStepNeverWaitsForTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testing::Workspace ws(/*train=*/512, /*test=*/64);
  for (const auto& [optimizer, placement] : {std::pair<std::string, std::string>{"sgd", "host"}, {"adam", "device"}}) {
    const int short_run = syncs_of_a_run(ws, 256, optimizer, placement);
    EXPECT_EQ(syncs_of_a_run(ws, 512, optimizer, placement), short_run)
        << optimizer << ", batches made on the " << placement << ": 4 steps made " << short_run;
  }
}
#endif

// What the training thread and its intra-op pool do with denormals, at each step: whether the
// thread kept one, and the share a parallel op kept.
class DenormalProbe : public TrainObserver {
 public:
  void on_step(const StepProgress& /*progress*/) override {
    thread_kept.push_back(!runtime::FlushDenormalGuard::flushing());
    pool_kept.push_back(testing::share_of_denormals_kept());
  }
  std::vector<bool> thread_kept;
  std::vector<double> pool_kept;
};

// The pool is started first, so that its threads cannot take the bits from the training thread.
TEST(Trainer, FlushDenormalHoldsOnTheTrainingThreadAndItsPoolForTheRunAndNoLonger) {
  const testing::IntraOpThreads two(2);
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  for (const bool flush : {false, true}) {
    auto doc = ws.base_spec(fmt::format("flush_denormal_{}", flush));
    doc["replicas"]["threads"] = 2;
    doc["replicas"]["flush_denormal"] = flush;
    const config::ExperimentSpec spec = config::resolve(doc);
    rundir::RunLog::create(spec, /*overwrite=*/true);
    ReplicaOptions options;
    options.run_dir = rundir::run_dir(spec);
    auto probe = std::make_shared<DenormalProbe>();
    options.observer = probe;
    train_replica(spec, distributed::World{}, options);
    ASSERT_FALSE(probe->thread_kept.empty());
    EXPECT_EQ(probe->thread_kept, std::vector<bool>(probe->thread_kept.size(), !flush)) << "flush_denormal " << flush;
    EXPECT_EQ(probe->pool_kept, std::vector<double>(probe->pool_kept.size(), flush ? 0.0 : 1.0))
        << "flush_denormal " << flush;
    EXPECT_FALSE(runtime::FlushDenormalGuard::flushing()) << "after the run";
    EXPECT_EQ(testing::share_of_denormals_kept(), 1.0) << "after the run";
  }
}

TEST(Trainer, DivergenceIsAgreedByEveryRankAtTheSameStepAndWritesNoRecord) {
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("diverging");
  doc["replicas"]["count"] = 2;
  doc["optimizer"] = {{"name", "sgd"}, {"lr", 1e30}};
  const config::ExperimentSpec spec = config::resolve(doc);
  const auto runs = train_ranks(spec, 2);
  const auto on_rank0 = thrown<Diverged>(runs[0]);
  const auto on_rank1 = thrown<Diverged>(runs[1]);
  EXPECT_EQ(on_rank0.step, on_rank1.step);
  EXPECT_EQ(on_rank0.epoch, 1);
  EXPECT_TRUE(runs[0].recorder->epochs.empty());
  EXPECT_TRUE(numeric_records(spec).empty());
}

}  // namespace
}  // namespace ddplab::train
