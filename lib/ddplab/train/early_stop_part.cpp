// Selection on the validation split as a part (early_stop.h): an epoch that improves on the best is
// saved as best.pt (with the weights it evaluated); once early_stop.patience runs out the run ends,
// and the manifest's "early_stop" entry and a note say why it has fewer epochs. Checkpoints keep the
// best epoch and its metric (best_epoch, best_metric).
#include <memory>

#include "ddplab/rundir/layout.h"
#include "ddplab/train/early_stop.h"
#include "ddplab/train/network.h"
#include "ddplab/train/part.h"
#include "ddplab/train/run_writer.h"

namespace ddplab::train {
namespace {

class EarlyStopPart : public Part {
 public:
  explicit EarlyStopPart(const PartContext& c) : c_(c), early_stop_(c.spec.early_stop) {}

  void end_epoch(const rundir::EpochRecord& rec) override {
    if (rec.val_loss && early_stop_.improved(rec))
      c_.writer.save_module(rundir::best_model_file(c_.writer.run_dir()), *c_.net.model, &c_.epoch_model);
  }

  bool stops_before(int64_t epochs_done) const override { return early_stop_.should_stop(epochs_done); }

  void end_run(int64_t epochs_done) override {
    if (epochs_done >= c_.spec.epochs) return;
    c_.writer.update_manifest({{"early_stop", early_stop_.manifest_entry(epochs_done)}});
    c_.writer.note(early_stop_.note(epochs_done));
  }

  void save(PartState& state) override {
    state.set("best_epoch", static_cast<double>(early_stop_.best_epoch().value_or(0)));
    state.set("best_metric", early_stop_.best());
  }

  void load(const PartState& state, const std::filesystem::path& /*file*/) override {
    if (const auto best_epoch = static_cast<int64_t>(state.number("best_epoch")); best_epoch > 0)
      early_stop_.restore(best_epoch, state.number("best_metric"));
  }

 private:
  PartContext c_;
  EarlyStop early_stop_;
};

std::unique_ptr<Part> make(const PartContext& c) { return std::make_unique<EarlyStopPart>(c); }

}  // namespace

DDPLAB_REGISTER_PART(early_stop, &make);

}  // namespace ddplab::train
