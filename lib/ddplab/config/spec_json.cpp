// Reading a spec: JSON text and files, command-line overrides (spec.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/config/spec.h"

namespace ddplab::config {
namespace {

using nlohmann::json;

// json::parse with a nesting limit (see kMaxJsonDepth in spec.h) that refuses a key given twice
// in one object: JSON parsers keep the last, so the first would be silently ignored.
json parse_bounded(const std::string& text, const std::string& source) {
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string last_key;
  };
  std::vector<Frame> frames;
  return json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) throw Error(fmt::format("{}: JSON nested deeper than {} levels", source, kMaxJsonDepth));
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      frames.push_back({event == E::object_start, {}, {}});
    } else if ((event == E::object_end || event == E::array_end) && !frames.empty()) {
      frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!frames.back().keys.insert(key).second) {
        std::string where;
        bool in_array = false;
        for (size_t i = 0; i + 1 < frames.size() && !in_array; ++i) {
          in_array = !frames[i].object;
          if (!in_array) where += "/" + escape_token(frames[i].last_key);
        }
        throw Error(source + ": key \"" + key + "\" appears twice in the object " + (in_array ? "under " : "at ") +
                    (where.empty() ? "/" : where) +
                    "; JSON keeps only the last, so the first would be silently ignored");
      }
      frames.back().last_key = key;
    }
    return true;
  });
}

// Whether nlohmann can write `text` as a JSON string (it throws on invalid UTF-8).
bool is_utf8(const std::string& text) {
  try {
    (void)json(text).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// apply_override's step from `node` (the value at dotted key `walked`) to its child `part`: a key of
// an object (made if missing), or an index of an existing array element (model.layers.1.channels).
json& override_child(json& node, const std::string& part, const std::string& walked, const std::string& assignment) {
  if (node.is_object()) return node[part];
  if (!node.is_array()) throw Error("override \"" + assignment + "\": \"" + walked + "\" is not an object");
  const bool digits = std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || part.size() > 9 || std::stoul(part) >= node.size())
    throw Error(fmt::format("override \"{}\": \"{}\" is a list of {} items; \"{}\" is not the index of one", assignment,
                            walked, node.size(), part));
  return node[std::stoul(part)];
}

}  // namespace

std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string json_message(const nlohmann::json::exception& e) {
  std::string what = e.what();
  size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

nlohmann::json load_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a spec file");
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": no such spec file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read spec file: {}", path, std::strerror(errno)));
  // Bounded: a spec is a few kilobytes; /dev/zero or a wrong file must not take all memory.
  constexpr size_t kMaxSpecBytes = 16 << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSpecBytes) throw Error(path + ": larger than 16 MiB; not a spec file");
  }
  if (in.bad()) throw Error(path + ": cannot read spec file");
  return parse_json_text(text, path);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  // nlohmann's parser stops at a NUL byte as at the end of the text; what follows would be lost.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(fmt::format("{}: a NUL byte at offset {}; a JSON text holds none", source, nul));
  try {
    return parse_bounded(text, source);
  } catch (const json::parse_error& e) {
    // e.byte counts characters read, 1-based; the culprit is the last one read.
    size_t at = e.byte == 0 ? 0 : std::min(e.byte - 1, text.size());
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
    size_t line_start = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
    size_t col = line_start == std::string::npos ? at + 1 : at - line_start;
    std::string what = e.what();
    size_t column_pos = what.find("column ");
    size_t colon = column_pos == std::string::npos ? std::string::npos : what.find(": ", column_pos);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw Error(fmt::format("{}:{}:{}: malformed JSON: {}", source, line, col, what));
  } catch (const json::exception& e) {
    // out_of_range 406 "number overflow parsing '1e999'": no position is known.
    throw Error(source + ": malformed JSON: " + json_message(e));
  }
}

void apply_override(nlohmann::json& doc, const std::string& assignment) {
  // A value or key that is not UTF-8 would make every later dump() (error messages, spec.json)
  // throw; nothing on a command line needs it.
  if (!is_utf8(assignment)) throw Error("override \"" + assignment + "\": not valid UTF-8");
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) throw Error("override \"" + assignment + "\": expected key.path=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  if (key.empty() || key.back() == '.' ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }))
    throw Error("override \"" + assignment + "\": empty key");
  json value;
  try {
    value = parse_bounded(text, "override \"" + assignment + "\"");
  } catch (const json::parse_error&) {
    value = text;  // bare words are strings: name=foo
  } catch (const json::exception& e) {
    throw Error("override \"" + assignment + "\": " + json_message(e));
  }
  if (doc.is_null()) doc = json::object();
  json* node = &doc;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    json& next = override_child(*node, parts[i], walked, assignment);
    walked += (walked.empty() ? "" : ".") + parts[i];
    if (next.is_null()) next = json::object();
    node = &next;
  }
  override_child(*node, parts.back(), walked, assignment) = std::move(value);
}

nlohmann::json load_document(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = load_json_file(path);
  for (const auto& o : overrides) apply_override(doc, o);
  return doc;
}

}  // namespace ddplab::config
