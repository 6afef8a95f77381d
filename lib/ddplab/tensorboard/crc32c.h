// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord and TensorBoard
// event files. Not zlib's crc32, which is CRC-32 (polynomial 0xEDB88320) and gives other values:
// crc32c("123456789") is 0xE3069283, crc32("123456789") 0xCBF43926.
#pragma once
#include <cstdint>
#include <string_view>

namespace ddplab::tensorboard {

// The CRC-32C of `data`; crc32c("") is 0.
uint32_t crc32c(std::string_view data);

// The masked CRC that TFRecord framing stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8 over
// crc32c(data). Masking keeps a CRC of data that itself holds CRCs from being trivially related.
uint32_t masked_crc32c(std::string_view data);

}  // namespace ddplab::tensorboard
