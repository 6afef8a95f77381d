// SplitMix64 (Steele, Lea, Flood 2014), the hash behind the data order and the per-sample
// augmentation draws: an output that is a pure function of its input, so every stream is keyed by
// what it is for and needs no shared generator state. mix64 is the finalizer; one definition
// serves host integers and int64 tensors (two's-complement wrap-around gives uint64's low bits,
// and the right shifts are made logical), so the device computes the host's draws bit for bit.
#pragma once
#include <cstdint>
#include <type_traits>

#include <ATen/core/Tensor.h>

namespace ddplab::data {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, SplitMix64's step

// x >> k as uint64 (a logical shift), for integers and int64 tensors alike.
inline uint64_t shift_right(uint64_t x, int k) { return x >> k; }
inline at::Tensor shift_right(const at::Tensor& x, int k) {
  return x.bitwise_right_shift(k).bitwise_and(static_cast<int64_t>((~0ULL) >> k));
}

// A uint64 constant as the operand of T's arithmetic (int64 tensors take its bit pattern).
template <class T>
auto as_operand(uint64_t c) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return c;
  else
    return static_cast<int64_t>(c);
}

template <class T>
T mix64(T z) {
  z = (z ^ shift_right(z, 30)) * as_operand<T>(0xBF58476D1CE4E5B9ULL);
  z = (z ^ shift_right(z, 27)) * as_operand<T>(0x94D049BB133111EBULL);
  return z ^ shift_right(z, 31);
}

}  // namespace ddplab::data
