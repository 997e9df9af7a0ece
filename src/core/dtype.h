// dtype.h -- host conversions between float32 and the storage types the
// library reads and writes: IEEE half (fp16), bfloat16, and the two fp8
// formats of KV caches (OCP e4m3fn and e5m2).
//
// Rules (the CUDA backend must match them bit for bit where it stores):
//  - float -> fp16 / bf16 round to nearest, ties to even; overflow gives
//    +-inf; NaN stays a (quiet) NaN.
//  - float -> fp8 is *saturating*: the value is rounded to nearest even and
//    anything beyond the largest finite magnitude (448 for e4m3, 57344 for
//    e5m2), including +-inf, stores that largest finite value with its sign
//    (CUDA's __NV_SATFINITE).  NaN stores the format's NaN (0x7f | sign).
//  - fp8 -> float is exact (table look-up).  e4m3fn has no infinity; its
//    only NaN codes are 0x7f / 0xff.  e5m2 keeps IEEE inf / NaN codes.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace vattn {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- bfloat16: the high half of a float32 ------------------------------------
inline float bf16_to_float(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign, force a quiet payload
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ---- IEEE half ---------------------------------------------------------------------
inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return f32_from_bits(f32_bits(v) | sign);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x47800000u)  // |f| >= 65536 (or inf / NaN): beyond every finite half
    return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a < 0x38800000u) {
    // Result is subnormal or zero (|f| < 2^-14).  Adding 0.5 moves the half's
    // 10 subnormal bits to the bottom of the float mantissa; the FPU's own
    // round-to-nearest-even does the rounding.
    float t = f32_from_bits(a) + 0.5f;
    return static_cast<uint16_t>(sign | (f32_bits(t) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a carry out of the mantissa correctly bumps the exponent
  // (65520 and up become inf).
  uint32_t odd = (a >> 13) & 1u;
  a += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
  return static_cast<uint16_t>(sign | (a >> 13));
}

// ---- fp8 -------------------------------------------------------------------------------
constexpr float kFp8E4m3Max = 448.0f;
constexpr float kFp8E5m2Max = 57344.0f;

namespace detail {

constexpr float pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

struct Fp8Table {
  float v[256];
};

// Decodes every byte of a format with `mbits` mantissa bits and exponent bias
// `bias`.  e4m3fn (fn = finite, no inf): only S.1111.111 is NaN.  e5m2 is
// IEEE-like: exponent all ones is inf (mantissa 0) or NaN.
constexpr Fp8Table make_fp8_table(int mbits, int bias, bool ieee_specials) {
  Fp8Table t{};
  const int ebits = 7 - mbits;
  const int emax_field = (1 << ebits) - 1;
  const int mmask = (1 << mbits) - 1;
  for (int b = 0; b < 256; ++b) {
    const bool neg = (b & 0x80) != 0;
    const int e = (b >> mbits) & emax_field;
    const int m = b & mmask;
    float v = 0.0f;
    if (ieee_specials && e == emax_field) {
      v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (!ieee_specials && e == emax_field && m == mmask) {
      v = std::numeric_limits<float>::quiet_NaN();
    } else if (e == 0) {
      v = static_cast<float>(m) * pow2(1 - bias - mbits);
    } else {
      v = (1.0f + static_cast<float>(m) * pow2(-mbits)) * pow2(e - bias);
    }
    t.v[b] = neg ? -v : v;
  }
  return t;
}

inline constexpr Fp8Table kE4m3 = make_fp8_table(3, 7, false);
inline constexpr Fp8Table kE5m2 = make_fp8_table(2, 15, true);

// Saturating round-to-nearest-even encoder shared by both formats.
uint8_t float_to_fp8(float x, int mbits, int bias, float max_finite, uint8_t max_code,
                     uint8_t nan_code);

}  // namespace detail

inline float fp8_e4m3_to_float(uint8_t b) { return detail::kE4m3.v[b]; }
inline float fp8_e5m2_to_float(uint8_t b) { return detail::kE5m2.v[b]; }

inline uint8_t float_to_fp8_e4m3(float x) {
  return detail::float_to_fp8(x, 3, 7, kFp8E4m3Max, 0x7e, 0x7f);
}
inline uint8_t float_to_fp8_e5m2(float x) {
  return detail::float_to_fp8(x, 2, 15, kFp8E5m2Max, 0x7b, 0x7f);
}

}  // namespace vattn
