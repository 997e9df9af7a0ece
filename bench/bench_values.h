// bench_values.h -- value generation and element encodings shared by the
// host and (in bench_fill.cu) the device: a counter-based hash so that the
// same (seed, index) gives the same value everywhere, and float <-> bf16 /
// fp16 / fp8 (e4m3fn, e5m2) conversions with round-to-nearest-even.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BENCH_HD __host__ __device__ __forceinline__
#else
#define BENCH_HD inline
#endif

namespace vbench {

// Element kinds the fill routines know.
enum ElemKind : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2, kE4M3 = 3, kE5M2 = 4 };

BENCH_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from (seed, index); never exactly zero-filled data.
BENCH_HD float uniform_pm1(uint64_t seed, uint64_t i) {
  const uint64_t h = mix64(seed ^ mix64(i + 0x632be59bd9b4e019ull));
  return static_cast<float>(static_cast<double>(h >> 40) * (1.0 / 8388608.0) - 1.0);
}

BENCH_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
BENCH_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- bf16 ----------------------------------------------------------------------
BENCH_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
BENCH_HD float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// ---- fp16 (finite inputs of modest range; denormals handled) --------------------
BENCH_HD uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7e00;                       // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {                                     // fp16 subnormal or zero
    if (a < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const int e = static_cast<int>(a >> 23);                 // 102..112
    const int shift = 126 - e;                               // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = a - 0x38000000u;  // rebias 127 -> 15 (in the 23-bit mantissa frame)
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}
BENCH_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_f32(sign);
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- fp8: generic RNE encoder for a format with `mbits` mantissa bits and
// exponent bias `bias`; saturates to max_code (finite) ----------------------------
BENCH_HD uint8_t f32_to_fp8(float f, int mbits, int bias, uint8_t max_code) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);  // NaN (both formats)
  const int e32 = static_cast<int>(a >> 23) - 127;
  // Smallest normal exponent is 1 - bias; below it values are subnormal.
  const int min_e = 1 - bias;
  uint32_t code;
  if (a == 0) return sign;
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;  // 24 bits, value = mant * 2^(e32-23)
  int e = e32;
  int shift;  // bits to drop from the 24-bit significand
  if (e < min_e) {
    shift = 23 - mbits + (min_e - e);
    e = min_e - 1;  // subnormal: exponent field 0
  } else {
    shift = 23 - mbits;
  }
  if (shift > 31) return sign;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  // r now holds (implicit bit + mbits) for normals, or mbits (+carry) for subnormals.
  int efield = e + bias;  // 0 for subnormal
  if (efield <= 0) {
    // subnormal: r < 2^mbits, or == 2^mbits after rounding up into the first normal
    code = r;
  } else {
    if (r >> (mbits + 1)) {  // mantissa overflow after rounding
      r >>= 1;
      ++efield;
    }
    code = (static_cast<uint32_t>(efield) << mbits) | (r & ((1u << mbits) - 1u));
  }
  if (code > max_code) code = max_code;
  return static_cast<uint8_t>(sign | code);
}
BENCH_HD float fp8_to_f32(uint8_t b, int mbits, int bias) {
  const bool neg = (b & 0x80u) != 0;
  const int efield = (b & 0x7f) >> mbits;
  const int m = b & ((1 << mbits) - 1);
  float v;
  if (efield == 0) {
    v = static_cast<float>(m) / static_cast<float>(1 << mbits);
    // 2^(1 - bias)
    float s = 1.f;
    for (int i = 0; i < bias - 1; ++i) s *= 0.5f;
    v *= s;
  } else {
    v = 1.f + static_cast<float>(m) / static_cast<float>(1 << mbits);
    int ex = efield - bias;
    for (; ex > 0; --ex) v *= 2.f;
    for (; ex < 0; ++ex) v *= 0.5f;
  }
  return neg ? -v : v;
}
// e4m3fn: bias 7, max finite 0x7e (448); e5m2: bias 15, max finite 0x7b (57344).
BENCH_HD uint8_t f32_to_e4m3(float f) { return f32_to_fp8(f, 3, 7, 0x7e); }
BENCH_HD uint8_t f32_to_e5m2(float f) { return f32_to_fp8(f, 2, 15, 0x7b); }
BENCH_HD float e4m3_to_f32(uint8_t b) {
  if ((b & 0x7f) == 0x7f) return bits_f32(0x7fc00000u);
  return fp8_to_f32(b, 3, 7);
}
BENCH_HD float e5m2_to_f32(uint8_t b) {
  if ((b & 0x7c) == 0x7c) return bits_f32(0x7fc00000u);  // inf/NaN: never generated
  return fp8_to_f32(b, 2, 15);
}

BENCH_HD int elem_bytes(int32_t kind) { return kind == kF32 ? 4 : (kind == kF16 || kind == kBF16) ? 2 : 1; }

// Stores x as element `i` of a buffer of `kind`.
BENCH_HD void store_elem(void *base, int64_t i, int32_t kind, float x) {
  switch (kind) {
    case kF32: static_cast<float *>(base)[i] = x; break;
    case kF16: static_cast<uint16_t *>(base)[i] = f32_to_f16(x); break;
    case kBF16: static_cast<uint16_t *>(base)[i] = f32_to_bf16(x); break;
    case kE4M3: static_cast<uint8_t *>(base)[i] = f32_to_e4m3(x); break;
    default: static_cast<uint8_t *>(base)[i] = f32_to_e5m2(x); break;
  }
}
BENCH_HD float load_elem(const void *base, int64_t i, int32_t kind) {
  switch (kind) {
    case kF32: return static_cast<const float *>(base)[i];
    case kF16: return f16_to_f32(static_cast<const uint16_t *>(base)[i]);
    case kBF16: return bf16_to_f32(static_cast<const uint16_t *>(base)[i]);
    case kE4M3: return e4m3_to_f32(static_cast<const uint8_t *>(base)[i]);
    default: return e5m2_to_f32(static_cast<const uint8_t *>(base)[i]);
  }
}

}  // namespace vbench
