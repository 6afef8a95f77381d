// GradReducer's state across a resume (distributed/grad_reducer.h): its rebuilt bucket layout
// (bucket_layout), so the resumed run all-reduces the same buckets, and its comm hook's state
// (comm_hook_states, index = rank: PowerSGD's iteration, Q matrices and error feedback, each rank's own).
#include <memory>

#include <torch/torch.h>

#include "ddplab/distributed/grad_reducer.h"
#include "ddplab/train/part.h"

namespace ddplab::train {
namespace {

class ReducerStatePart : public Part {
 public:
  explicit ReducerStatePart(const PartContext& c) : c_(c) {}

  void save(PartState& state) override {
    if (const auto layout = c_.reducer.rebuilt_layout(); !layout.empty())
      state.set("bucket_layout", torch::tensor(layout, torch::kInt64));
    if (const at::Tensor hook = c_.reducer.comm_hook_state(); hook.defined())
      state.set("comm_hook_states", c_.world.size > 1 ? gather_blobs(*c_.comm, hook) : std::vector<at::Tensor>{hook});
  }

  void load(const PartState& state, const std::filesystem::path& file) override {
    if (const at::Tensor saved = state.tensor("bucket_layout"); saved.defined()) {
      const at::Tensor layout = saved.cpu().contiguous();
      c_.reducer.restore_layout({layout.data_ptr<int64_t>(), layout.data_ptr<int64_t>() + layout.numel()});
    }
    if (const auto hooks = state.list("comm_hook_states"); !hooks.empty())
      c_.reducer.load_comm_hook_state(
          own_entry(file, hooks, "the gradient compression states of {} ranks", c_.world.rank, c_.world.size));
  }

 private:
  PartContext c_;
};

std::unique_ptr<Part> make(const PartContext& c) { return std::make_unique<ReducerStatePart>(c); }

}  // namespace

DDPLAB_REGISTER_PART(reducer_state, &make);

}  // namespace ddplab::train
