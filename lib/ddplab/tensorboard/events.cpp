#include "ddplab/tensorboard/events.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "ddplab/base/error.h"
#include "ddplab/tensorboard/crc32c.h"
#include "ddplab/tensorboard/protobuf.h"

namespace ddplab::tensorboard {
namespace {

// Event and Summary.Value fields (event.proto, summary.proto).
enum EventField { kWallTime = 1, kStep = 2, kFileVersionField = 3, kSummary = 5, kSessionLog = 7 };
enum ValueField { kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9 };

std::string little_endian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}

uint64_t read_little_endian(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  return value;
}

// An Event {wall_time, step, summary {value}} around one serialized Summary.Value.
std::string summary_event(double wall_time, int64_t step, const std::string& value) {
  ProtoWriter summary;
  summary.add_message(1, value);
  ProtoWriter event;
  event.add_double(kWallTime, wall_time);
  event.add_varint(kStep, step);
  event.add_message(kSummary, summary.bytes());
  return event.bytes();
}

// TensorProto {dtype: DT_FLOAT (1), tensor_shape {dim {size: 0}}}: the hparams plugin's NULL_TENSOR.
std::string null_tensor() {
  ProtoWriter shape;
  shape.add_message(2, "");
  ProtoWriter tensor;
  tensor.add_varint(1, 1);
  tensor.add_message(2, shape.bytes());
  return tensor.bytes();
}

// A Summary.Value of the hparams plugin holding HParamsPluginData {version 0, <field>: message}.
std::string hparams_event(double wall_time, const char* tag, int field, const std::string& message) {
  ProtoWriter plugin_data_content;
  plugin_data_content.add_varint(1, 0);  // version: 0, left out as proto3 does
  plugin_data_content.add_message(field, message);
  ProtoWriter plugin_data;
  plugin_data.add_bytes(1, kHParamsPlugin);
  plugin_data.add_bytes(2, plugin_data_content.bytes());
  ProtoWriter metadata;
  metadata.add_message(1, plugin_data.bytes());
  ProtoWriter value;
  value.add_bytes(kTag, tag);
  value.add_message(kTensor, null_tensor());
  value.add_message(kMetadata, metadata.bytes());
  return summary_event(wall_time, 0, value.bytes());
}

// google.protobuf.Value: its kind is a oneof, so a 0, "" or false is written too.
std::string protobuf_value(const HParamValue& v) {
  ProtoWriter w;
  if (const auto* number = std::get_if<double>(&v)) w.add_double(2, *number, Presence::kExplicit);
  if (const auto* text = std::get_if<std::string>(&v)) w.add_bytes(3, *text, Presence::kExplicit);
  if (const auto* flag = std::get_if<bool>(&v)) w.add_bool(4, *flag, Presence::kExplicit);
  return w.bytes();
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtoWriter event;
  event.add_double(kWallTime, wall_time);
  event.add_bytes(kFileVersionField, kFileVersion, Presence::kExplicit);
  return event.bytes();
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  ProtoWriter v;
  v.add_bytes(kTag, tag);
  v.add_float(kSimpleValue, value, Presence::kExplicit);
  return summary_event(wall_time, step, v.bytes());
}

std::string session_start_event(double wall_time, const SessionStart& start) {
  ProtoWriter info;
  for (const auto& [name, value] : start.hparams) {
    ProtoWriter entry;  // a map entry: {key 1, value 2}
    entry.add_bytes(1, name);
    entry.add_message(2, protobuf_value(value));
    info.add_message(1, entry.bytes());
  }
  info.add_bytes(4, start.group_name);
  info.add_double(5, start.start_time_secs);
  return hparams_event(wall_time, kSessionStartTag, 3, info.bytes());
}

std::string session_end_event(double wall_time, SessionStatus status, double end_time_secs) {
  ProtoWriter info;
  info.add_varint(1, static_cast<int64_t>(status));
  info.add_double(2, end_time_secs);
  return hparams_event(wall_time, kSessionEndTag, 4, info.bytes());
}

std::string session_log_start_event(double wall_time, int64_t step) {
  ProtoWriter session_log;
  session_log.add_varint(1, 1);  // status: START
  ProtoWriter event;
  event.add_double(kWallTime, wall_time);
  event.add_varint(kStep, step);
  event.add_message(kSessionLog, session_log.bytes());
  return event.bytes();
}

std::string frame_record(std::string_view data) {
  const std::string length = little_endian(data.size(), 8);
  std::string record = length;
  record += little_endian(masked_crc32c(length), 4);
  record.append(data);
  record += little_endian(masked_crc32c(data), 4);
  return record;
}

std::vector<std::string> read_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read", file.string()));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string_view all(bytes);
  std::vector<std::string> records;
  for (size_t at = 0; at < all.size();) {
    const auto bad = [&](const std::string& why) {
      return Error(fmt::format("{}: record {} at byte {}: {}", file.string(), records.size() + 1, at, why));
    };
    if (all.size() - at < 12) throw bad("truncated (the file ends inside its length header)");
    const std::string_view length = all.substr(at, 8);
    if (read_little_endian(all.substr(at + 8, 4)) != masked_crc32c(length)) throw bad("corrupt (bad length CRC)");
    const uint64_t size = read_little_endian(length);
    if (all.size() - at - 12 < size || all.size() - at - 12 - size < 4)
      throw bad(fmt::format("truncated (holds {} bytes of data, the file ends first)", size));
    const std::string_view data = all.substr(at + 12, size);
    if (read_little_endian(all.substr(at + 12 + size, 4)) != masked_crc32c(data)) throw bad("corrupt (bad data CRC)");
    records.emplace_back(data);
    at += 12 + size + 4;
  }
  return records;
}

}  // namespace ddplab::tensorboard
