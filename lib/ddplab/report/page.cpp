#include "ddplab/report/page.h"

#include <fmt/format.h>

#include "ddplab/report/svg.h"

namespace ddplab::report {
namespace {
const char* const kCss = R"(body{font-family:sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
tr:nth-child(even) td{background:#fafafa}
.warnings li{color:#a33}
figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}
figcaption{color:#555;font-size:13px;max-width:760px}
.arm{display:inline-block;white-space:nowrap}
.swatch{display:inline-block;width:1.6em;height:0.7em;margin:0 0.3em 0 0.6em}
.note{color:#555;font-size:14px;max-width:60em})";
}  // namespace

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '<')
      out += {'\\', c};
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string html_table(const Table& t, const std::string& cls) {
  std::string o = fmt::format("<table class=\"{}\">\n<thead><tr>", cls);
  for (const auto& h : t[0]) o += fmt::format("<th>{}</th>", escape_html(h));
  o += "</tr></thead>\n<tbody>\n";
  for (size_t i = 1; i < t.size(); ++i) {
    o += "<tr>";
    for (const auto& c : t[i]) o += fmt::format("<td>{}</td>", escape_html(c));
    o += "</tr>\n";
  }
  return o + "</tbody></table>\n";
}

std::string md_table(const Table& t) {
  std::string o;
  auto row = [&](const std::vector<std::string>& cells) {
    o += "|";
    for (const auto& c : cells) o += fmt::format(" {} |", md_cell(c));
    o += '\n';
  };
  row(t[0]);
  o += "|";
  for (size_t i = 0; i < t[0].size(); ++i) o += " --- |";
  o += '\n';
  for (size_t i = 1; i < t.size(); ++i) row(t[i]);
  return o;
}

std::string html_page_start(const std::string& title) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>\n{}\n</style>\n</head>\n<body>\n",
      escape_html(title), kCss);
}

std::string html_page_end() { return "</body>\n</html>\n"; }

}  // namespace ddplab::report
