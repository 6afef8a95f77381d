// The TensorBoard event file format, written by hand (protobuf.h): the records of an
// events.out.tfevents.* file and the messages they hold. Field numbers are those of tensorboard
// 2.21.0's protos (tensorboard/compat/proto/event.proto, summary.proto,
// tensorboard/plugins/hparams/plugin_data.proto and api.proto, google/protobuf/struct.proto):
//
//   Event            wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5,
//                    session_log 7
//   SessionLog       status 1 (START 1)
//   Summary          value 1 (repeated Summary.Value)
//   Summary.Value    tag 1, simple_value 2 (float), tensor 8 (TensorProto), metadata 9
//   SummaryMetadata  plugin_data 1 {plugin_name 1, content 2 (bytes)}
//   HParamsPluginData  version 1 (int32, 0), session_start_info 3, session_end_info 4
//   SessionStartInfo   hparams 1 (map<string, google.protobuf.Value>), group_name 4, start_time_secs 5
//   SessionEndInfo     status 1 (Status), end_time_secs 2
//   google.protobuf.Value  number_value 2 (double), string_value 3, bool_value 4
//
// A record (TFRecord framing) is: the data's length (uint64, little-endian), the masked CRC-32C
// of those 8 bytes (uint32 LE), the data, the masked CRC-32C of the data (uint32 LE); crc32c.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ddplab::tensorboard {

// The file_version of an event file's first record.
inline constexpr const char* kFileVersion = "brain.Event:2";
// The tags and plugin name of the HParams plugin's summaries (tensorboard/plugins/hparams/metadata.py).
inline constexpr const char* kSessionStartTag = "_hparams_/session_start_info";
inline constexpr const char* kSessionEndTag = "_hparams_/session_end_info";
inline constexpr const char* kHParamsPlugin = "hparams";

// The HParams plugin's session status (tensorboard.hparams.Status in api.proto; tensorboard
// 2.21.0 has no "aborted").
enum class SessionStatus { kUnknown = 0, kSuccess = 1, kFailure = 2, kRunning = 3 };

// An hparam's value: a number, a string or a bool (google.protobuf.Value's kinds the plugin reads).
using HParamValue = std::variant<double, std::string, bool>;

struct SessionStart {
  std::map<std::string, HParamValue> hparams;  // written sorted by name
  std::string group_name;                      // sessions with the same group name form one session group
  double start_time_secs = 0;
};

// Serialized Event messages.
// The first record of every event file: {wall_time, file_version: kFileVersion}.
std::string file_version_event(double wall_time);
// One scalar: {wall_time, step, summary {value {tag, simple_value}}}.
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
// The HParams summaries as tensorboard.plugins.hparams.summary.session_start_pb and session_end_pb
// make them: a Summary.Value with the tag above, a null tensor (DT_FLOAT, shape [0]; the data
// loader keeps only values that hold data) and metadata {plugin_data {plugin_name "hparams",
// content: a serialized HParamsPluginData}}, in an Event at step 0.
std::string session_start_event(double wall_time, const SessionStart& start);
std::string session_end_event(double wall_time, SessionStatus status, double end_time_secs);
// {wall_time, step, session_log {status: START}}: TensorBoard's Python loader (EventAccumulator)
// drops every event it read before with a step >= `step` (a restarted run's orphaned steps).
std::string session_log_start_event(double wall_time, int64_t step);

// `data` framed as one record.
std::string frame_record(std::string_view data);

// The records of an event file, in order (their data, unframed). Throws ddplab::Error naming the
// file and the record's offset for a truncated record or one whose length or data CRC is wrong.
std::vector<std::string> read_records(const std::filesystem::path& file);

}  // namespace ddplab::tensorboard
