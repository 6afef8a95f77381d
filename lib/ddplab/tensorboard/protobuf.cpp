#include "ddplab/tensorboard/protobuf.h"

#include <cstring>

#include <c10/util/Exception.h>

namespace ddplab::tensorboard {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

}  // namespace

void ProtoWriter::put_tag(int field, int wire_type) {
  TORCH_INTERNAL_ASSERT(field >= 1 && field < (1 << 29), "protobuf field number out of range: ", field);
  put_varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::put_varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::put_fixed(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void ProtoWriter::add_varint(int field, int64_t value, Presence presence) {
  if (value == 0 && presence == Presence::kImplicit) return;
  put_tag(field, kVarint);
  put_varint(static_cast<uint64_t>(value));
}

void ProtoWriter::add_double(int field, double value, Presence presence) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0 && presence == Presence::kImplicit) return;
  put_tag(field, kFixed64);
  put_fixed(bits, 8);
}

void ProtoWriter::add_float(int field, float value, Presence presence) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0 && presence == Presence::kImplicit) return;
  put_tag(field, kFixed32);
  put_fixed(bits, 4);
}

void ProtoWriter::add_bytes(int field, std::string_view value, Presence presence) {
  if (value.empty() && presence == Presence::kImplicit) return;
  put_tag(field, kLengthDelimited);
  put_varint(value.size());
  out_.append(value);
}

}  // namespace ddplab::tensorboard
