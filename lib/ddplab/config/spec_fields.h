// The one mapping from the schema's JSON pointers to ExperimentSpec's fields. Every field that a
// single schema property fills is listed here once; resolve() reads them through it (spec.cpp,
// to_typed) and tests/config/spec_fields_test.cpp checks that each field's default equals the
// schema's "default" and each enum's names equal the schema's "enum".
//
// Not listed, because one property does not fill one field (spec.cpp reads them by hand):
// batch.per_replica / batch.global (one of them; both make per_replica_batch and global_batch),
// optimizer.betas (beta1, beta2), optimizer.weight_decay_groups and model.layers (lists of objects),
// replicas.sync (a name or an object; SyncSpec), debug.fault (a name or a list; DebugSpec::faults).
// The sweep keys, report.* (report/report.h) and slurm.* (config/slurm.h) are not ExperimentSpec's.
//
// Adding a spec field: its property (with "default") in schema.json, its member (with the same
// default) in spec.h, its line here, and docs/spec.md; the test then checks the first three agree.
#pragma once
#include "ddplab/config/spec.h"

namespace ddplab::config {

// Calls visit(pointer, field) for every listed field of `spec`, in the schema's order. `Spec` is
// ExperimentSpec or const ExperimentSpec.
template <class Spec, class Visit>
void for_each_field(Spec& spec, Visit&& visit) {
  visit("/name", spec.name);
  visit("/dataset/name", spec.dataset.name);
  visit("/dataset/root", spec.dataset.root);
  visit("/dataset/train_limit", spec.dataset.train_limit);
  visit("/dataset/test_limit", spec.dataset.test_limit);
  visit("/dataset/augment", spec.dataset.augment);
  visit("/dataset/order", spec.dataset.order);
  visit("/dataset/shard", spec.dataset.shard);
  visit("/dataset/validation", spec.dataset.validation);
  visit("/model/name", spec.model.name);
  visit("/model/torchscript", spec.model.torchscript);
  visit("/model/dropout", spec.model.dropout);
  visit("/model/hidden", spec.model.hidden);
  visit("/model/ema_decay", spec.model.ema_decay);
  visit("/model/sync_bn", spec.model.sync_bn);
  visit("/optimizer/name", spec.optimizer.name);
  visit("/optimizer/lr", spec.optimizer.lr);
  visit("/optimizer/momentum", spec.optimizer.momentum);
  visit("/optimizer/nesterov", spec.optimizer.nesterov);
  visit("/optimizer/weight_decay", spec.optimizer.weight_decay);
  visit("/optimizer/eps", spec.optimizer.eps);
  visit("/schedule/scale_rule", spec.schedule.scale_rule);
  visit("/schedule/base_batch", spec.schedule.base_batch);
  visit("/schedule/warmup_epochs", spec.schedule.warmup_epochs);
  visit("/schedule/warmup_start_factor", spec.schedule.warmup_start_factor);
  visit("/schedule/decay", spec.schedule.decay);
  visit("/schedule/step_epochs", spec.schedule.step_epochs);
  visit("/schedule/milestones", spec.schedule.milestones);
  visit("/schedule/gamma", spec.schedule.gamma);
  visit("/schedule/min_factor", spec.schedule.min_factor);
  visit("/batch/accumulate_steps", spec.accumulate_steps);
  visit("/replicas/count", spec.replicas.count);
  visit("/replicas/device", spec.replicas.device);
  visit("/replicas/backend", spec.replicas.backend);
  visit("/replicas/reduce", spec.replicas.reduce);
  visit("/replicas/grad_dtype", spec.replicas.grad_dtype);
  visit("/replicas/bucket_mb", spec.replicas.bucket_mb);
  visit("/replicas/threads", spec.replicas.threads);
  visit("/replicas/timeout_s", spec.replicas.timeout_s);
  visit("/replicas/max_restarts", spec.replicas.max_restarts);
  visit("/replicas/mode", spec.replicas.mode);
  visit("/epochs", spec.epochs);
  visit("/precision", spec.precision);
  visit("/seed", spec.seed);
  visit("/output", spec.output);
  visit("/early_stop/metric", spec.early_stop.metric);
  visit("/early_stop/patience", spec.early_stop.patience);
  visit("/early_stop/min_delta", spec.early_stop.min_delta);
  visit("/checkpoint/every_epochs", spec.checkpoint.every_epochs);
  visit("/checkpoint/keep", spec.checkpoint.keep);
  visit("/log/every_steps", spec.log.every_steps);
  visit("/log/eval_every_steps", spec.log.eval_every_steps);
  visit("/log/eval_samples", spec.log.eval_samples);
  visit("/log/progress_s", spec.log.progress_s);
  visit("/log/tensorboard", spec.log.tensorboard);
  visit("/debug/audits", spec.debug.audits);
  visit("/debug/rank", spec.debug.rank);
  visit("/debug/step", spec.debug.step);
}

}  // namespace ddplab::config
