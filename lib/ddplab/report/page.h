// The report's page pieces, shared with other front ends (the planner's plan.html): a table kept
// as rows of text and written as HTML or Markdown, and a self-contained HTML page (the report's
// CSS inline, nothing fetched) around a body.
#pragma once
#include <string>
#include <vector>

namespace ddplab::report {

// Rows of a table shared by HTML and Markdown; the first row holds the headings.
using Table = std::vector<std::vector<std::string>>;

// <table class="cls"> with <thead> and <tbody>; every cell escaped (svg.h escape_html).
std::string html_table(const Table& t, const std::string& cls);
// A Markdown table: "| a | b |", "| --- | --- |", then the rows; every cell through md_cell.
std::string md_table(const Table& t);
// Markdown text, not HTML: no entities (a reader sees "can't", not "can&#39;t"); a '|' would end
// a table cell and a '<' open an HTML tag, so both are backslash-escaped; a newline becomes a space.
std::string md_cell(const std::string& s);

// "<!DOCTYPE html>...<body>\n" with `title` (escaped) in <title> and the report's CSS inline;
// the caller appends the body and html_page_end().
std::string html_page_start(const std::string& title);
std::string html_page_end();

}  // namespace ddplab::report
