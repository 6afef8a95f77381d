#include "ddplab/tensorboard/events.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "ddplab/tensorboard/crc32c.h"
#include "ddplab/tensorboard/event_file.h"
#include "ddplab/tensorboard/protobuf.h"
#include "test_util.h"

using namespace ddplab::tensorboard;
using ddplab::testing::error_of;
using ddplab::testing::read_file;
using ddplab::testing::TempDir;
using ddplab::testing::write_file;

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) {
    out += digits[(static_cast<unsigned char>(c) >> 4) & 0xF];
    out += digits[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

// Golden records, produced with tensorboard 2.21.0 (protobuf 7.36.2) in a scratch venv: the Event
// built with tensorboard.compat.proto.event_pb2 / summary_pb2 (the HParams summaries with
// tensorboard.plugins.hparams.summary_v2._summary_pb, which session_start_pb's summaries equal
// but for needing TensorFlow), serialized and framed by
// tensorboard.summary.writer.record_writer.RecordWriter:
//   event_pb2.Event(wall_time=1700000000.0, file_version="brain.Event:2")
constexpr const char* kFileVersionRecord =
    "1800000000000000a37f4b220900000040fc54d9411a0d627261696e2e4576656e743a32eced8f9d";
//   Event(wall_time=1700000012.5, step=4096, summary=Summary(value=[Value(tag="test/acc", simple_value=0.8125)]))
constexpr const char* kScalarRecord =
    "1f00000000000000514b44180900002043fc54d9411080202a110a0f0a08746573742f616363150000503f4f7e5405";
//   Event(wall_time=1700000000.0, summary=_summary_pb("_hparams_/session_start_info", HParamsPluginData(
//     session_start_info=SessionStartInfo(hparams={"schedule.scale_rule": string_value "linear"},
//       group_name="replicas.count=2, schedule.scale_rule=linear", start_time_secs=1700000000.0))))
constexpr const char* kSessionStartRecord =
    "9e00000000000000da84ca450900000040fc54d9412a92010a8f010a1c5f68706172616d735f2f73657373696f6e5f73746172745f"
    "696e666f42060801120212004a670a650a0768706172616d73125a1a580a1f0a137363686564756c652e7363616c655f72756c6512"
    "081a066c696e656172222c7265706c696361732e636f756e743d322c207363686564756c652e7363616c655f72756c653d6c696e65"
    "61722900000040fc54d941478f8caa";
//   the same with wall_time=1.0, hparams={"k": number_value 2}, group_name="g", no start time
constexpr const char* kSessionStartNumberRecord =
    "5700000000000000e6ba948c09000000000000f03f2a4c0a4a0a1c5f68706172616d735f2f73657373696f6e5f73746172745f696e"
    "666f42060801120212004a220a200a0768706172616d7312151a130a0e0a016b12091100000000000000402201676b6047fb";
//   ... hparams={"k": bool_value False}: a oneof member, written although false
constexpr const char* kSessionStartBoolRecord =
    "5000000000000000940f9b8209000000000000f03f2a450a430a1c5f68706172616d735f2f73657373696f6e5f73746172745f696e"
    "666f42060801120212004a1b0a190a0768706172616d73120e1a0c0a070a016b120220002201670e715709";
//   Event(wall_time=1700000100.0, summary=_summary_pb("_hparams_/session_end_info", HParamsPluginData(
//     session_end_info=SessionEndInfo(status=STATUS_SUCCESS, end_time_secs=1700000100.0))))
constexpr const char* kSessionEndRecord =
    "4d000000000000003d63d4a60900000059fc54d9412a420a400a1a5f68706172616d735f2f73657373696f6e5f656e645f696e666f"
    "42060801120212004a1a0a180a0768706172616d73120d220b08011100000059fc54d9419c9a77a7";
//   Event(wall_time=1700000050.0, step=12800, session_log=SessionLog(status=START)), serialized only
constexpr const char* kSessionLogStartEvent = "090000804cfc54d9411080643a020801";

}  // namespace

TEST(Crc32c, CheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
}

TEST(ProtoWriter, Proto3LeavesOutDefaultsButNotOneofMembers) {
  ProtoWriter w;
  w.add_varint(1, 0);
  w.add_double(2, 0.0);
  w.add_bytes(3, "");
  EXPECT_EQ(w.bytes(), "");
  w.add_varint(1, 300);
  w.add_float(2, 0.0f, Presence::kExplicit);
  w.add_varint(3, -1);
  EXPECT_EQ(hex(w.bytes()),
            "08ac02"
            "1500000000"
            "18ffffffffffffffffff01");
}

TEST(TensorBoardEvents, RecordsEqualTensorBoardsBytes) {
  EXPECT_EQ(hex(frame_record(file_version_event(1700000000.0))), kFileVersionRecord);
  EXPECT_EQ(hex(frame_record(scalar_event(1700000012.5, 4096, "test/acc", 0.8125f))), kScalarRecord);
  SessionStart start;
  start.hparams["schedule.scale_rule"] = std::string("linear");
  start.group_name = "replicas.count=2, schedule.scale_rule=linear";
  start.start_time_secs = 1700000000.0;
  EXPECT_EQ(hex(frame_record(session_start_event(1700000000.0, start))), kSessionStartRecord);
  SessionStart number{{{"k", 2.0}}, "g", 0};
  EXPECT_EQ(hex(frame_record(session_start_event(1.0, number))), kSessionStartNumberRecord);
  SessionStart flag{{{"k", false}}, "g", 0};
  EXPECT_EQ(hex(frame_record(session_start_event(1.0, flag))), kSessionStartBoolRecord);
  EXPECT_EQ(hex(frame_record(session_end_event(1700000100.0, SessionStatus::kSuccess, 1700000100.0))),
            kSessionEndRecord);
  EXPECT_EQ(hex(session_log_start_event(1700000050.0, 12800)), kSessionLogStartEvent);
}

TEST(TensorBoardEvents, ReaderReturnsTheRecordsWritten) {
  TempDir tmp;
  EventFile file(5.0);
  file.add_scalar(6.0, 128, "train/loss", 0.25);
  file.write(tmp.path() / "events.out.tfevents.5.host");
  const auto records = read_records(tmp.path() / "events.out.tfevents.5.host");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], file_version_event(5.0));
  EXPECT_EQ(records[1], scalar_event(6.0, 128, "train/loss", 0.25f));
  EXPECT_EQ(event_file_name(1700000000.9, "node1"), "events.out.tfevents.1700000000.node1");
}

TEST(TensorBoardEvents, ReaderDetectsTruncatedAndCorruptRecords) {
  TempDir tmp;
  EventFile file(5.0);
  file.add_scalar(6.0, 128, "train/loss", 0.25);
  const std::string bytes = file.bytes();
  const auto path = tmp.path() / "events";
  write_file(path, bytes.substr(0, bytes.size() - 3));
  EXPECT_NE(error_of([&] { read_records(path); }).find("record 2 at byte 40: truncated"), std::string::npos)
      << error_of([&] { read_records(path); });
  write_file(path, bytes.substr(0, 45));
  EXPECT_NE(error_of([&] { read_records(path); }).find("truncated"), std::string::npos);
  std::string flipped = bytes;
  flipped[bytes.size() - 10] ^= 0x01;  // a bit of the scalar's data
  write_file(path, flipped);
  EXPECT_NE(error_of([&] { read_records(path); }).find("record 2 at byte 40: corrupt (bad data CRC)"),
            std::string::npos);
  flipped = bytes;
  flipped[40] ^= 0x01;  // the scalar record's length
  write_file(path, flipped);
  EXPECT_NE(error_of([&] { read_records(path); }).find("corrupt (bad length CRC)"), std::string::npos);
  EXPECT_NE(error_of([&] { read_records(tmp.path() / "missing"); }).find("missing: cannot read"), std::string::npos);
}
