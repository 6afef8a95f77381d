// What each spec field is for, declared once: the "role" of its property in schema.json. Every
// leaf property of the schema (one without properties of its own: a value, a list, or a oneOf as
// replicas.sync) has one; tests/config/field_roles_test.cpp fails naming a leaf that has none.
// What a run is (its identity, rundir::effective_spec), which runs the report puts in one group
// (report/grouping.cpp), which settings follow another and what the planner's calibration must
// share (plan::planned_spec), what a sweep may sweep and what a run's spec.json holds are derived
// from the roles, not listed by hand.
//
//   role       fields                         a change refuses a resume   the report groups
//                                             (the run's identity)        runs apart by it
//   trains     what is trained and how        yes                         yes
//   seed       seed                           yes                         no: a group pools its seeds
//   logs       log.*, checkpoint.*            no                          yes: they decide which
//                                                                         records a run has
//   directory  name, output                   no                          no
//   launcher   replicas.timeout_s,            no                          no: a restarted run gives
//              replicas.max_restarts,                                     the records of one never
//              debug.rank, debug.step, slurm.*                            stopped
//   report     report.*                       no                          no
//   sweep      sweep, sweep_zip, repeats      no                          no
//
// Every role but sweep is in a run's resolved spec (the sweep keys expand into runs), and every
// role but directory and sweep may be swept (name and output place the runs).
//
// debug.fault trains, but only its bugs (skip_broadcast, ...): its drills (crash, throw, stop) are
// the launcher's, and effective_spec keeps the bugs alone. A property's "follows" names the field
// that its "auto" value is derived from (replicas.threads: replicas.count); the report names a
// setting that only follows another instead of counting it as a second one.
#pragma once
#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ddplab/config/settings.h"

namespace ddplab::config {

enum class FieldRole { kTrains, kSeed, kLogs, kDirectory, kLauncher, kReport, kSweep };
template <>
struct SettingNames<FieldRole> {
  static constexpr std::array names{"trains", "seed", "logs", "directory", "launcher", "report", "sweep"};
};

// Whether a field of this role is part of a run's identity: trains and seed.
bool in_identity(FieldRole role);
// Whether the report puts runs that differ in a field of this role in different groups: trains
// and logs.
bool groups_runs(FieldRole role);
// Whether a field of this role is in a run's resolved spec (spec.json): all but sweep.
bool in_run_spec(FieldRole role);
// Whether a field of this role may be a sweep axis: all but directory and sweep.
bool sweepable(FieldRole role);

struct SpecField {
  std::string pointer;  // "/replicas/threads"
  FieldRole role = FieldRole::kTrains;
  std::string follows;  // the pointer of the field its "auto" value is derived from; "" for none
};

// Every leaf property of the schema with its role, in the schema's order. A leaf without a valid
// role is a broken invariant (TORCH_INTERNAL_ASSERT naming it).
const std::vector<SpecField>& spec_fields();

// The field that holds `pointer`: the field itself, or the one above it ("/model/layers/0/kernel"
// is in /model/layers, "/replicas/sync/easgd/alpha" in /replicas/sync); nullptr when no field does
// (a key of another ddplab version).
const SpecField* field_at(const std::string& pointer);

// `doc` (a spec document) without each field whose role `keep` refuses; an object that this
// leaves empty goes too. Keys that no field holds stay.
nlohmann::json fields_kept(nlohmann::json doc, bool (*keep)(FieldRole));

}  // namespace ddplab::config
