// mlp: flatten -> fc (C*H*W)->hidden -> ReLU -> dropout(p) -> fc hidden->classes; for fast tests.
#include <torch/torch.h>

#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

namespace nn = torch::nn;

class Mlp : public Model {
 public:
  Mlp(const InputShape& s, int64_t hidden, double dropout)
      : fc1_(register_module("fc1", nn::Linear(s.channels * s.height * s.width, hidden))),
        fc2_(register_module("fc2", nn::Linear(hidden, s.classes))),
        dropout_(dropout) {}

  at::Tensor forward(const at::Tensor& x) override {
    auto h = torch::relu(fc1_->forward(x.flatten(1)));
    h = torch::dropout(h, dropout_, is_training());
    return fc2_->forward(h);
  }

 private:
  nn::Linear fc1_, fc2_;
  double dropout_;
};

std::shared_ptr<Model> make(const ModelOptions& options, const InputShape& shape) {
  return std::make_shared<Mlp>(shape, options.hidden, options.dropout);
}

}  // namespace

DDPLAB_REGISTER_MODEL(mlp, "one hidden layer", /*has_batch_norm=*/false, &make);

}  // namespace ddplab::models
