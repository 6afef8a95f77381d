#include "spec_checks.h"

#include <cstdint>
#include <set>
#include <string>

#include "ddplab/base/error.h"
#include "fuzz_check.h"

namespace ddplab::fuzz {
namespace {

using nlohmann::json;

bool same_integer(int64_t typed, const json& v) {
  if (v.is_number_unsigned()) return typed >= 0 && static_cast<uint64_t>(typed) == v.get<uint64_t>();
  if (v.is_number_integer()) return typed == v.get<int64_t>();
  return false;
}

bool same_number(double typed, const json& v) { return v.is_number() && typed == v.get<double>(); }

bool safe_directory_name(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.find("..") != std::string::npos) return false;
  for (char c : s) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '=' || c == ',' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void check_typed(const config::ExperimentSpec& s) {
  const json& r = s.resolved;
  DDPLAB_FUZZ_CHECK(safe_directory_name(s.name) && s.name.front() != '.');
  DDPLAB_FUZZ_CHECK(!s.dataset.root.empty());
  DDPLAB_FUZZ_CHECK(same_integer(s.dataset.train_limit, r["dataset"]["train_limit"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.dataset.test_limit, r["dataset"]["test_limit"]));
  // spec.json leaves out the model options the model does not use (config::options_the_model_lacks).
  DDPLAB_FUZZ_CHECK(!r["model"].contains("hidden") || same_integer(s.model.hidden, r["model"]["hidden"]));
  DDPLAB_FUZZ_CHECK(!r["model"].contains("dropout") || same_number(s.model.dropout, r["model"]["dropout"]));
  DDPLAB_FUZZ_CHECK(same_number(s.optimizer.lr, r["optimizer"]["lr"]));
  DDPLAB_FUZZ_CHECK(same_number(s.optimizer.beta2, r["optimizer"]["betas"][1]));
  DDPLAB_FUZZ_CHECK(same_integer(s.schedule.base_batch, r["schedule"]["base_batch"]));
  DDPLAB_FUZZ_CHECK(s.schedule.milestones.size() == r["schedule"]["milestones"].size());
  DDPLAB_FUZZ_CHECK(same_integer(s.replicas.count, r["replicas"]["count"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.replicas.threads, r["replicas"]["threads"]) && s.replicas.threads >= 1);
  DDPLAB_FUZZ_CHECK(same_integer(s.replicas.max_restarts, r["replicas"]["max_restarts"]));
  DDPLAB_FUZZ_CHECK(same_number(s.replicas.timeout_s, r["replicas"]["timeout_s"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.epochs, r["epochs"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.seed, r["seed"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.debug.rank, r["debug"]["rank"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.debug.step, r["debug"]["step"]));
  DDPLAB_FUZZ_CHECK(same_integer(s.checkpoint.every_epochs, r["checkpoint"]["every_epochs"]));
  const json& batch = r["batch"];
  DDPLAB_FUZZ_CHECK(batch.contains("per_replica") != batch.contains("global"));
  DDPLAB_FUZZ_CHECK(batch.contains("per_replica") ? same_integer(s.per_replica_batch, batch["per_replica"])
                                                  : same_integer(s.global_batch, batch["global"]));
  DDPLAB_FUZZ_CHECK(s.per_replica_batch >= 1 && s.global_batch / s.replicas.count == s.per_replica_batch &&
                    s.global_batch % s.replicas.count == 0);
  const json& groups = r["optimizer"]["weight_decay_groups"];
  DDPLAB_FUZZ_CHECK(s.optimizer.weight_decay_groups.size() == groups.size());
  for (size_t i = 0; i < groups.size(); ++i)
    DDPLAB_FUZZ_CHECK(s.optimizer.weight_decay_groups[i].match == groups[i]["match"]);
  const json& sync = r["replicas"]["sync"];
  if (sync.is_string()) {
    DDPLAB_FUZZ_CHECK(sync == config::name(s.replicas.sync.method));
  } else {
    DDPLAB_FUZZ_CHECK(sync.is_object() && sync.size() == 1 && sync.contains(config::name(s.replicas.sync.method)));
    const json& method = sync[config::name(s.replicas.sync.method)];
    DDPLAB_FUZZ_CHECK(same_integer(s.replicas.sync.period, method["period"]) && s.replicas.sync.period >= 1);
    if (method.contains("start_epoch"))
      DDPLAB_FUZZ_CHECK(same_integer(s.replicas.sync.start_epoch, method["start_epoch"]));
    if (method.contains("alpha")) DDPLAB_FUZZ_CHECK(same_number(s.replicas.sync.alpha, method["alpha"]));
  }
  for (const char* key : {"sweep", "sweep_zip", "repeats"}) DDPLAB_FUZZ_CHECK(!r.contains(key));
}

}  // namespace

void check_runs(const std::vector<config::SweepRun>& runs) {
  DDPLAB_FUZZ_CHECK(!runs.empty());
  std::set<std::string> ids;
  for (const auto& run : runs) {
    DDPLAB_FUZZ_CHECK(run.spec.run_id == run.run_id);
    DDPLAB_FUZZ_CHECK(safe_directory_name(run.run_id));
    DDPLAB_FUZZ_CHECK(ids.insert(run.run_id).second);
    DDPLAB_FUZZ_CHECK(run.spec.name == runs.front().spec.name);
    check_typed(run.spec);
    // spec.json, manifest.json and `ddplab run --dry-run` write these.
    (void)run.spec.resolved.dump();
    (void)run.assignments.dump();
    (void)config::resolved_differences(runs.front().spec.resolved, run.spec.resolved);
    try {
      config::ExperimentSpec again = config::resolve(run.spec.resolved, "spec.json");
      DDPLAB_FUZZ_CHECK(again.resolved == run.spec.resolved);
    } catch (const Error& e) {
      std::fprintf(stderr, "a resolved spec does not resolve again: %s\n", e.what());
      std::abort();
    }
  }
}

}  // namespace ddplab::fuzz
