// bfloat16 storage: the upper 16 bits of an IEEE float (8-bit exponent, 7-bit mantissa).
//
// rm::bf16 is a plain 2-byte value with the bit layout of CUDA's __nv_bfloat16, so device
// buffers of either type are the same bytes. Conversions are RM_HOST_DEVICE and bit-exact on
// both sides, so a bf16 job computes the same values whichever backend runs it:
//   - to float: exact (shift into the high half).
//   - from float: round to nearest, ties to even, as __float2bfloat16_rn; overflow rounds to
//     +-inf; every NaN becomes the canonical quiet NaN 0x7FFF (what __float2bfloat16_rn gives).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace rm {

struct bf16 {
  uint16_t bits;
};
static_assert(sizeof(bf16) == 2, "bf16 must be two bytes (the layout of __nv_bfloat16)");

RM_HOST_DEVICE inline uint32_t float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

RM_HOST_DEVICE inline float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

RM_HOST_DEVICE inline float to_float(bf16 x) { return bits_float(static_cast<uint32_t>(x.bits) << 16); }

RM_HOST_DEVICE inline bf16 to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return bf16{0x7FFF};  // NaN
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest with ties to even; a carry into the
  // exponent is the correct rounding up (to the next binade, or from the largest finite to inf).
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(rounded >> 16)};
}

// Storage-type conversions for code templated on T = float or bf16.
RM_HOST_DEVICE inline float load(float x) { return x; }
RM_HOST_DEVICE inline float load(bf16 x) { return to_float(x); }
template <typename T>
RM_HOST_DEVICE inline T store(float x);
template <>
RM_HOST_DEVICE inline float store<float>(float x) { return x; }
template <>
RM_HOST_DEVICE inline bf16 store<bf16>(float x) { return to_bf16(x); }

}  // namespace rm
