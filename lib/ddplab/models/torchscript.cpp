// torchscript: a module saved from Python with torch.jit.script(model).save(path) (or traced),
// model.torchscript, loaded with torch::jit::load (docs/models.md). Its parameters and buffers
// are registered in this Model under their own dotted names (the same tensors, shared with the
// script module, in its order), so the trainer's gradient buckets, optimizer, checkpoints,
// BatchNorm buffer broadcast and device moves act on the module's own weights; train()/eval()
// switch the script module too (BatchNorm, dropout). At construction one dummy batch of two
// zero images runs through forward in eval mode without gradients: a file that is missing, not
// TorchScript, or whose forward does not map [B, C, H, W] to [B, classes] is a spec error naming
// /model/torchscript, the file and the shapes.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "ddplab/config/spec_error.h"
#include "ddplab/models/models.h"

namespace ddplab::models {
namespace {

constexpr const char* kPointer = "/model/torchscript";

// A LibTorch error without its C++ backtrace: its first line (loading), or its last (the
// TorchScript interpreter puts the failing op's message, "RuntimeError: ...", last).
std::string error_line(const std::exception& e, bool last) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  std::string what = c10 != nullptr ? c10->what_without_backtrace() : e.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  return last ? what.substr(what.rfind('\n') + 1) : what.substr(0, what.find('\n'));
}

// Registers `from`'s own parameters and buffers in `into` (sharing the tensors) and a mirror of
// each child module as a submodule of the same name.
void mirror(torch::nn::Module& into, const torch::jit::Module& from) {
  for (const auto& p : from.named_parameters(/*recurse=*/false))
    into.register_parameter(p.name, p.value, p.value.requires_grad());
  for (const auto& b : from.named_buffers(/*recurse=*/false)) into.register_buffer(b.name, b.value);
  for (const auto& c : from.named_children()) {
    auto child = std::make_shared<torch::nn::Module>();
    mirror(*child, c.value);
    into.register_module(c.name, child);
  }
}

torch::jit::Module load_script(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw config::spec_error(kPointer, fmt::format("no such file: \"{}\"", path));
  try {
    return torch::jit::load(path);
  } catch (const std::exception& e) {
    // A zip archive without TorchScript's constants.pkl is what torch.save writes; LibTorch then
    // suggests a corrupted file, which it is not.
    if (error_line(e, /*last=*/false).find("constants.pkl") != std::string::npos)
      throw config::spec_error(
          kPointer, fmt::format("\"{}\" was saved with torch.save (a pickled module or state_dict), which C++ cannot "
                                "load as a module; save it with torch.jit.save(torch.jit.script(model), path)",
                                path));
    throw config::spec_error(kPointer, fmt::format("\"{}\" is not a TorchScript module (save one from Python with "
                                                   "torch.jit.script(model).save(path)): {}",
                                                   path, error_line(e, /*last=*/false)));
  }
}

class ScriptModel : public Model {
 public:
  ScriptModel(const std::string& path, const InputShape& s) : module_(load_script(path)) {
    mirror(*this, module_);
    check_forward(path, s);
    train(true);
  }

  at::Tensor forward(const at::Tensor& x) override { return module_.forward({x}).toTensor(); }

  void train(bool on) override {
    module_.train(on);
    torch::nn::Module::train(on);
  }

 private:
  // One batch of two zero images, in eval mode (no BatchNorm statistics or dropout draws).
  void check_forward(const std::string& path, const InputShape& s) {
    torch::NoGradGuard no_grad;
    train(false);
    const at::Tensor x = torch::zeros({2, s.channels, s.height, s.width});
    const std::string images = fmt::format("[2, {}, {}, {}]", s.channels, s.height, s.width);
    c10::IValue out;
    try {
      out = module_.forward({x});
    } catch (const std::exception& e) {
      throw config::spec_error(kPointer, fmt::format("the module in \"{}\" cannot take the dataset's images {}: {}",
                                                     path, images, error_line(e, /*last=*/true)));
    }
    if (!out.isTensor() || out.toTensor().sizes().vec() != std::vector<int64_t>{2, s.classes})
      throw config::spec_error(
          kPointer, fmt::format("the module in \"{}\" must map the dataset's images {} to logits [2, {}], gives {}",
                                path, images, s.classes,
                                out.isTensor() ? fmt::format("[{}]", fmt::join(out.toTensor().sizes(), ", "))
                                               : std::string(out.tagKind())));
  }

  torch::jit::Module module_;
};

std::shared_ptr<Model> make(const ModelOptions& options, const InputShape& shape) {
  if (options.torchscript.empty())
    throw config::spec_error(kPointer, "model.name \"torchscript\" needs the path of a saved module, got \"\"");
  return std::make_shared<ScriptModel>(options.torchscript, shape);
}

}  // namespace

DDPLAB_REGISTER_MODEL(torchscript, "a TorchScript module saved from Python (model.torchscript)",
                      /*has_batch_norm=*/false, &make);

}  // namespace ddplab::models
