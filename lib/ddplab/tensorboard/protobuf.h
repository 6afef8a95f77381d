// A tiny protobuf encoder: enough of the wire format (varints, fixed64 doubles, fixed32 floats,
// length-delimited strings, bytes and submessages) to write the messages TensorBoard reads
// (events.h), without libprotobuf (the torch wheel's protobuf 3.13 headers shadow any other
// version, docs/tensorboard.md).
//
// Fields are written in the order they are added; protobuf's own serializers write them by field
// number, so callers add them in that order to get the same bytes. proto3 leaves out a field with
// implicit presence that holds its default (0, false, ""), and writes members of a oneof and
// submessages whenever they are set: Presence says which applies.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ddplab::tensorboard {

enum class Presence {
  kImplicit,  // a plain proto3 scalar or string: left out when it holds its default
  kExplicit,  // a oneof member (or optional field): written even when it holds its default
};

class ProtoWriter {
 public:
  // Wire type 0 (varint): int32, int64, uint64, bool and enums; negative values take 10 bytes,
  // as protobuf sign-extends them.
  void add_varint(int field, int64_t value, Presence presence = Presence::kImplicit);
  void add_bool(int field, bool value, Presence presence = Presence::kImplicit) {
    add_varint(field, value ? 1 : 0, presence);
  }
  // Wire type 1 (fixed64, little-endian): double. A default is +0.0 exactly (-0.0 is written).
  void add_double(int field, double value, Presence presence = Presence::kImplicit);
  // Wire type 5 (fixed32, little-endian): float.
  void add_float(int field, float value, Presence presence = Presence::kImplicit);
  // Wire type 2 (length-delimited): string or bytes.
  void add_bytes(int field, std::string_view value, Presence presence = Presence::kImplicit);
  // Wire type 2: a serialized submessage; written even when empty (submessages have presence).
  void add_message(int field, std::string_view serialized) { add_bytes(field, serialized, Presence::kExplicit); }

  const std::string& bytes() const { return out_; }

 private:
  void put_tag(int field, int wire_type);
  void put_varint(uint64_t value);
  void put_fixed(uint64_t value, int bytes);
  std::string out_;
};

}  // namespace ddplab::tensorboard
