// The enum-like settings of a spec, parsed once (config::resolve) from the schema's strings into
// enum classes; no other layer compares a setting as a string. name(v) gives the spelling the
// spec and spec.json use ("fashion-mnist", "local_sgd"), for messages and records.
#pragma once
#include <array>
#include <cstddef>
#include <string>

#include "ddplab/base/error.h"

namespace ddplab::config {

enum class DatasetName { kFashionMnist, kMnist, kIdx, kCifar10, kCifar100 };
enum class Augment { kNone, kStandard, kTfTutorial };  // data/transform.h
enum class DataOrder { kIndependent, kTorchSampler };  // data/loader.h: how an epoch's order is seeded
enum class DataShard { kContiguous, kStrided };        // data/loader.h: which replica takes which sample
enum class DataPlacement { kAuto, kHost, kDevice };    // data/device_data.h: where batches are made
enum class StopMetric { kValLoss, kValAcc };           // train/early_stop.h: what chooses the best epoch
enum class OptimizerName { kSgd, kAdam, kAdamw };
enum class ScaleRule { kNone, kLinear, kSqrt };  // lr x 1, k, sqrt(k) for k = global / base batch
enum class Decay { kConstant, kStep, kMultistep, kExponential, kCosine };
enum class Device { kCpu, kCuda };
enum class Backend { kGloo, kNccl };  // the schema's "auto" is resolved before parsing
enum class Reduce { kMean, kSum };
enum class WireDtype { kFp32, kBf16, kFp16 };  // replicas.grad_dtype
enum class Compression { kNone, kPowerSgd };   // replicas.compression (distributed/comm_hook.h)
enum class ReplicaMode { kProcesses, kSimulated };
enum class SyncMethod { kAllreduce, kLocalSgd, kEasgd };
enum class Precision { kFp32, kBf16 };
enum class Fault {
  kNone,
  kSkipBroadcast,
  kUpdateFirstOnly,
  kCrash,
  kThrow,
  kStop,
  kOneSidedSigmoidLoss,
  kEvalFirstHalf
};
enum class AuditMode { kAbort, kWarn };  // debug.audits: what a failed audit does
// model.layers[i].type (models/layers.cpp)
enum class LayerType { kConv, kBatchNorm, kRelu, kGelu, kMaxPool, kAvgPool, kDropout, kFlatten, kLinear, kResidual };

// The spellings of each enum, in enumerator order.
template <class E>
struct SettingNames;
template <>
struct SettingNames<DatasetName> {
  static constexpr std::array names{"fashion-mnist", "mnist", "idx", "cifar10", "cifar100"};
};
template <>
struct SettingNames<Augment> {
  static constexpr std::array names{"none", "standard", "tf_tutorial"};
};
template <>
struct SettingNames<DataOrder> {
  static constexpr std::array names{"independent", "torch_sampler"};
};
template <>
struct SettingNames<DataShard> {
  static constexpr std::array names{"contiguous", "strided"};
};
template <>
struct SettingNames<DataPlacement> {
  static constexpr std::array names{"auto", "host", "device"};
};
template <>
struct SettingNames<StopMetric> {
  static constexpr std::array names{"val_loss", "val_acc"};
};
template <>
struct SettingNames<OptimizerName> {
  static constexpr std::array names{"sgd", "adam", "adamw"};
};
template <>
struct SettingNames<ScaleRule> {
  static constexpr std::array names{"none", "linear", "sqrt"};
};
template <>
struct SettingNames<Decay> {
  static constexpr std::array names{"constant", "step", "multistep", "exponential", "cosine"};
};
template <>
struct SettingNames<Device> {
  static constexpr std::array names{"cpu", "cuda"};
};
template <>
struct SettingNames<Backend> {
  static constexpr std::array names{"gloo", "nccl"};
};
template <>
struct SettingNames<Reduce> {
  static constexpr std::array names{"mean", "sum"};
};
template <>
struct SettingNames<WireDtype> {
  static constexpr std::array names{"fp32", "bf16", "fp16"};
};
template <>
struct SettingNames<Compression> {
  static constexpr std::array names{"none", "powersgd"};
};
template <>
struct SettingNames<ReplicaMode> {
  static constexpr std::array names{"processes", "simulated"};
};
template <>
struct SettingNames<SyncMethod> {
  static constexpr std::array names{"allreduce", "local_sgd", "easgd"};
};
template <>
struct SettingNames<Precision> {
  static constexpr std::array names{"fp32", "bf16"};
};
template <>
struct SettingNames<Fault> {
  static constexpr std::array names{"none",  "skip_broadcast", "update_first_only",      "crash",
                                    "throw", "stop",           "one_sided_sigmoid_loss", "eval_first_half"};
};
template <>
struct SettingNames<AuditMode> {
  static constexpr std::array names{"abort", "warn"};
};

template <>
struct SettingNames<LayerType> {
  static constexpr std::array names{"conv",     "batch_norm", "relu",    "gelu",   "max_pool",
                                    "avg_pool", "dropout",    "flatten", "linear", "residual"};
};

template <class E>
const char* name(E value) {
  return SettingNames<E>::names.at(static_cast<size_t>(value));
}

// The enumerator spelled `text`; an Error naming `pointer` (the JSON pointer) otherwise.
template <class E>
E parse_setting(const std::string& text, const std::string& pointer) {
  const auto& names = SettingNames<E>::names;
  for (size_t i = 0; i < names.size(); ++i)
    if (text == names[i]) return static_cast<E>(i);
  std::string expected;
  for (const char* n : names) expected += (expected.empty() ? "\"" : ", \"") + std::string(n) + "\"";
  throw Error(pointer + ": must be one of " + expected + ", got \"" + text + "\"");
}

}  // namespace ddplab::config
