// Helpers shared by the report's tests: options over a TempDir's runs and a group by its label.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "ddplab/report/report.h"
#include "test_util.h"

namespace ddplab::testing {

// Reads the runs below <tmp>/runs and writes the report into <tmp>/report.
inline report::ReportOptions options_for(const TempDir& tmp) {
  report::ReportOptions o;
  o.inputs = {tmp.path() / "runs"};
  o.out_dir = tmp.path() / "report";
  return o;
}

// The group of `d` labelled `label`; throws when there is none.
inline const report::GroupStats& group_labelled(const report::ReportData& d, std::string_view label) {
  for (const auto& g : d.groups)
    if (g.label == label) return g;
  throw std::runtime_error("no group " + std::string(label));
}

}  // namespace ddplab::testing
