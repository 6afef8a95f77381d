#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/config/spec.h"
#include "ddplab/data/dataset.h"
#include "ddplab/train/options.h"
#include "ddplab/train/subnormal_state.h"
#include "integration/integration_util.h"
#include "train/part_bench.h"

namespace ddplab::train {
namespace {

// An SGD momentum state of denormal floats (a unit that stopped firing, subnormal_state_test.cpp):
// the note comes at the first epoch's end that sees it, once; under replicas.flush_denormal there
// is no part to count.
TEST(SubnormalNotePart, NotesTheOptimizerStatesDenormalsOnceAndNotWhenTheyAreFlushed) {
  if (!kDenormalsAssisted) GTEST_SKIP() << "denormals cost nothing on this CPU: no note";
  testing::Workspace ws(/*train=*/256, /*test=*/64);
  auto doc = ws.base_spec("denormal_note");
  const config::ExperimentSpec spec = config::resolve(doc);
  const data::DatasetPair data = data::load_dataset(dataset_options(spec.dataset));
  PartBench bench(spec, data);
  auto part = bench.make("subnormal_note");
  ASSERT_NE(part, nullptr);
  rundir::EpochRecord rec;
  rec.epoch = 1;
  part->end_epoch(rec);
  EXPECT_TRUE(bench.recorder->notes.empty()) << "no state yet";

  for (const auto& p : bench.net.params) p.mutable_grad() = torch::ones_like(p);
  bench.net.optimizer->step();
  for (const auto& [key, state] : bench.net.optimizer->state())
    static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer().fill_(1e-40);
  rec.epoch = 2;
  part->end_epoch(rec);
  rec.epoch = 3;
  part->end_epoch(rec);
  ASSERT_EQ(bench.recorder->notes.size(), 1U) << "once a run";
  EXPECT_NE(bench.recorder->notes[0].find("epoch 2: "), std::string::npos) << bench.recorder->notes[0];

  doc["replicas"]["flush_denormal"] = true;
  const config::ExperimentSpec flushed = config::resolve(doc);
  PartBench flushing(flushed, data);
  EXPECT_EQ(flushing.make("subnormal_note"), nullptr);
}

}  // namespace
}  // namespace ddplab::train
