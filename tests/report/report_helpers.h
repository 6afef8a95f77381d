// Helpers shared by the report's tests: options over a TempDir's runs, a group by its label, what
// a written file holds.
#pragma once
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

// How often `needle` occurs in `text` (overlapping occurrences count).
inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The cell of a CSV (quoted fields allowed) in data row `row` (0: the first after the header)
// under the column named `name`; throws when there is none.
inline std::string csv_cell(const std::string& csv, size_t row, const std::string& name) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (quoted && c == '"' && i + 1 < csv.size() && csv[i + 1] == '"')
      rows.back().back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (!quoted && c == ',')
      rows.back().emplace_back();
    else if (!quoted && c == '\n')
      rows.emplace_back(1);
    else
      rows.back().back() += c;
  }
  const auto& header = rows.front();
  const size_t col = static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  if (col == header.size() || row + 1 >= rows.size() || col >= rows[row + 1].size())
    throw std::runtime_error("no cell " + name);
  return rows[row + 1][col];
}

}  // namespace ddplab::testing
