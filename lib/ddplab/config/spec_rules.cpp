// The cross-field rules of a spec: what one field's value asks of another's, checked after the
// schema (spec_steps.h); model.name and model.layers are model_rules.cpp's.
#include <algorithm>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/base/version.h"
#include "ddplab/config/slurm.h"
#include "ddplab/config/spec.h"
#include "ddplab/config/spec_steps.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// A fault aimed at a rank that does not exist would silently never happen.
void check_fault_rank(const json& doc, int64_t count) {
  const int64_t fault_rank = doc["debug"]["rank"].get<int64_t>();
  const bool one_process = doc["replicas"]["mode"] == "simulated";
  for (const std::string& fault : fault_names(doc["debug"]["fault"]))
    if ((fault == "crash" || fault == "throw" || fault == "stop") && fault_rank >= (one_process ? 1 : count))
      throw Error(fmt::format(
          "/debug/rank: must be < {} for fault \"{}\" (its default is 1), got {}",
          one_process ? "1 (simulated replicas run in one process)" : fmt::format("replicas.count ({})", count), fault,
          fault_rank));
}

// Resolves backend "auto" from the device, after checking the build has what each one needs.
void check_backend(json& replicas) {
  const std::string device = replicas["device"].get<std::string>();
  if (replicas["backend"] == "nccl" && !ddplab::built_with_cuda())
    throw Error(
        "/replicas/backend: nccl needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"nccl\"");
  if (device == "cuda" && !ddplab::built_with_cuda())
    throw Error(
        "/replicas/device: cuda needs a CUDA build of LibTorch; this ddplab is built without CUDA, got \"cuda\"");
  if (replicas["backend"] == "auto") replicas["backend"] = device == "cuda" ? "nccl" : "gloo";
  const std::string backend = replicas["backend"].get<std::string>();
  if (backend == "nccl" && device != "cuda")
    throw Error("/replicas/backend: nccl needs replicas.device \"cuda\", got device " + replicas["device"].dump());
  if (backend == "nccl" && !ddplab::built_with_nccl())
    throw Error(
        "/replicas/backend: nccl: this ddplab was built without NCCL (nccl.h was not found at build time; set "
        "NCCL_INCLUDE_DIR and rebuild), got \"nccl\"; \"gloo\" also reduces CUDA tensors");
}

// Fills an empty dataset root with the dataset's default location.
void check_dataset_root(json& dataset) {
  const std::string name = dataset["name"].get<std::string>();
  if (!dataset["root"].get<std::string>().empty()) return;
  if (name == "idx") throw Error("/dataset/root: dataset \"idx\" needs a root directory, got \"\"");
  dataset["root"] = default_root(parse_setting<DatasetName>(name, "/dataset/name"));
}

void check_weight_decay_groups(const json& groups) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string& pattern = groups[i]["match"].get_ref<const std::string&>();
    try {
      std::regex re(pattern);
    } catch (const std::regex_error& e) {
      throw Error(
          fmt::format("/optimizer/weight_decay_groups/{}/match: must be a valid regular expression ({}), "
                      "got {}",
                      i, e.what(), groups[i]["match"].dump()));
    }
  }
}

// What simulated replicas cannot do, and an EASGD alpha that would overshoot.
void check_sync(const json& doc, int64_t count) {
  const json& replicas = doc["replicas"];
  const bool simulated = replicas["mode"] == "simulated";
  const json& sync = replicas["sync"];
  if (simulated && sync.is_object())
    throw Error("/replicas/sync: simulated replicas (replicas.mode \"simulated\") support \"allreduce\" only, got " +
                sync.dump());
  if (simulated && doc["model"]["sync_bn"] == true)
    throw Error(
        "/model/sync_bn: simulated replicas (replicas.mode \"simulated\") compute one shard at a time and "
        "cannot share batch statistics across shards; use replicas.mode \"processes\", got true");
  if (sync.is_object() && doc["model"]["ema_decay"] != 0)
    throw Error(
        "/model/ema_decay: local SGD and EASGD evaluate the replicas' mean or the center variable; a weight "
        "EMA on top of that is not supported; use replicas.sync \"allreduce\", got " +
        doc["model"]["ema_decay"].dump());
  if (sync.is_object() && sync.contains("easgd")) {
    const double alpha = sync["easgd"]["alpha"].get<double>();
    if (alpha * static_cast<double>(count) > 1.0)
      throw Error(
          fmt::format("/replicas/sync/easgd/alpha: must be <= 1 / replicas.count ({}) so that the center "
                      "variable does not overshoot, got {}",
                      count, sync["easgd"]["alpha"].dump()));
  }
}

// PowerSGD sends fp32 factors between processes, and keeps state (error feedback, Q) from its
// start on that a bucket rebuild after the first step would throw away (PyTorch refuses the same).
void check_compression(const json& replicas) {
  if (replicas["compression"] != "powersgd") return;
  if (replicas["grad_dtype"] != "fp32")
    throw Error(
        "/replicas/grad_dtype: PowerSGD (replicas.compression \"powersgd\") sends its matrices in fp32; use "
        "grad_dtype \"fp32\", got " +
        replicas["grad_dtype"].dump());
  if (replicas["mode"] == "simulated")
    throw Error(
        "/replicas/compression: simulated replicas (replicas.mode \"simulated\") sum their gradients exactly; "
        "PowerSGD needs replicas.mode \"processes\", got \"powersgd\"");
  const json& p = replicas["powersgd"];
  if (p["start_iter"].get<int64_t>() < 2 && (p["error_feedback"] == true || p["warm_start"] == true))
    throw Error(
        "/replicas/powersgd/start_iter: must be >= 2 with error_feedback or warm_start (the gradient buckets are "
        "rebuilt after the first step, which would drop their state; PyTorch's PowerSGDState refuses it too), got " +
        p["start_iter"].dump());
}

// What a captured step cannot hold (train/graphed_step.h): collectives of 2+ replicas, autocast's
// cast cache, micro-batches, the weight EMA's update.
void check_cuda_graph(const json& doc, int64_t count) {
  if (doc["replicas"]["cuda_graph"] != true) return;
  std::vector<std::string> conflicts;
  if (count != 1) conflicts.push_back(fmt::format("replicas.count {}", count));
  if (doc["replicas"]["mode"] != "processes") conflicts.push_back("replicas.mode \"simulated\"");
  if (doc["replicas"]["sync"] != "allreduce") conflicts.push_back("replicas.sync " + doc["replicas"]["sync"].dump());
  if (doc["precision"] != "fp32") conflicts.push_back("precision " + doc["precision"].dump());
  if (doc["batch"]["accumulate_steps"] != 1)
    conflicts.push_back("batch.accumulate_steps " + doc["batch"]["accumulate_steps"].dump());
  if (doc["model"]["ema_decay"] != 0) conflicts.push_back("model.ema_decay " + doc["model"]["ema_decay"].dump());
  if (conflicts.empty()) return;
  std::string list;
  for (const auto& c : conflicts) list += (list.empty() ? "" : ", ") + c;
  throw Error(
      "/replicas/cuda_graph: a captured step takes one replica in one process, precision \"fp32\", "
      "batch.accumulate_steps 1, model.ema_decay 0 and replicas.sync \"allreduce\"; got true with " +
      list);
}

// Stopping early chooses on the validation split; without one there is nothing to choose on.
void check_early_stop(const json& doc) {
  if (doc["early_stop"]["patience"] != 0 && doc["dataset"]["validation"] == 0)
    throw Error(
        "/early_stop/patience: stopping early needs a validation split to choose on (dataset.validation, a "
        "fraction or a count of training samples), got patience " +
        doc["early_stop"]["patience"].dump() + " and no split");
}

// Batches made on the device look each byte up in a table (data/device_data.h): brightness,
// contrast and per-image statistics have no table.
void check_placement(const json& dataset) {
  if (dataset["placement"] == "device" && dataset["augment"] == "tf_tutorial")
    throw Error(
        "/dataset/placement: batches made on the device take dataset.augment \"none\" or \"standard\" "
        "(tf_tutorial's brightness, contrast and per-image standardization are made on the host); use "
        "\"host\" or \"auto\", got \"device\" with augment \"tf_tutorial\"");
}

// Each replica's batch is split into accumulate_steps micro-batches of equal size.
void check_accumulate_steps(const json& batch, int64_t count) {
  const int64_t per_replica =
      batch.contains("per_replica") ? batch["per_replica"].get<int64_t>() : batch["global"].get<int64_t>() / count;
  const int64_t steps = batch["accumulate_steps"].get<int64_t>();
  if (per_replica % steps != 0)
    throw Error(
        fmt::format("/batch/accumulate_steps: must divide the per-replica batch ({}) into equal "
                    "micro-batches, got {}",
                    per_replica, batch["accumulate_steps"].dump()));
}

// Evaluation points fall on step records: with both cadences set, every point closes a record.
void check_eval_cadence(const json& log) {
  const int64_t every = log["every_steps"].get<int64_t>(), eval = log["eval_every_steps"].get<int64_t>();
  if (every > 0 && eval % every != 0)
    throw Error(fmt::format("/log/eval_every_steps: must be a multiple of log.every_steps ({}), got {}", every,
                            log["eval_every_steps"].dump()));
}

}  // namespace

// debug.fault's names: the one name, or the array's (validated by the schema).
std::vector<std::string> fault_names(const json& fault) {
  return fault.is_string() ? std::vector<std::string>{fault.get<std::string>()} : fault.get<std::vector<std::string>>();
}

// A model given by model.layers or model.torchscript alone is named after it.
void infer_model_name(json& doc) {
  if (!doc.contains("model") || !doc["model"].is_object() || doc["model"].contains("name")) return;
  json& model = doc["model"];
  if (model.contains("layers")) model["name"] = "layers";
  if (model.contains("torchscript")) model["name"] = "torchscript";
}

void check_cross_fields(json& doc) {
  const json& batch = doc["batch"];
  if (batch.contains("per_replica") && batch.contains("global"))
    throw Error(fmt::format(
        "/batch: give exactly one of per_replica and global, got both ({} and {}); an override "
        "of one keeps the other, so switch by replacing the section: 'batch={{\"global\":{}}}' "
        "or 'batch={{\"per_replica\":{}}}'",
        batch["per_replica"].dump(), batch["global"].dump(), batch["global"].dump(), batch["per_replica"].dump()));
  if (!batch.contains("per_replica") && !batch.contains("global"))
    throw Error("/batch: give exactly one of per_replica and global, got neither");
  json& replicas = doc["replicas"];
  const int64_t count = replicas["count"].get<int64_t>();
  check_fault_rank(doc, count);
  if (batch.contains("global") && batch["global"].get<int64_t>() % count != 0)
    throw Error(
        fmt::format("/batch/global: must be divisible by replicas.count ({}), got {}", count, batch["global"].dump()));
  check_accumulate_steps(batch, count);
  check_backend(replicas);
  check_dataset_root(doc["dataset"]);
  check_weight_decay_groups(doc["optimizer"]["weight_decay_groups"]);
  check_model(doc["model"]);
  check_sync(doc, count);
  check_compression(replicas);
  check_cuda_graph(doc, count);
  check_early_stop(doc);
  check_placement(doc["dataset"]);
  check_eval_cadence(doc["log"]);
  slurm_options(doc);  // throws on a bad value, so `validate` reports it as `run --launcher slurm` would
  if (replicas["threads"].get<int64_t>() == 0) {
    const auto cores = static_cast<int64_t>(std::thread::hardware_concurrency());
    replicas["threads"] = std::max<int64_t>(1, replicas["mode"] == "simulated" ? cores : cores / count);
  }
}

}  // namespace ddplab::config
