// elem.h -- typed rows for the CPU backend: the storage element kinds the
// kernels read and write, and strided row <-> float32 conversion.
//
// A "row" is head_size elements of one (token, head), `stride` elements
// apart (1 in every usual layout; any non-negative stride works).  Loads
// multiply by `scale` (fp8 dequantization; 1 otherwise); fp8 stores divide
// by it and saturate (core/dtype.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "vattn.h"

namespace vattn {
namespace cpu {

enum class Elem : uint8_t { F32, F16, BF16, E4M3, E5M2 };

inline Elem elem_of(int32_t vattn_dtype) {
  switch (vattn_dtype) {
    case VATTN_DTYPE_FLOAT16: return Elem::F16;
    case VATTN_DTYPE_BFLOAT16: return Elem::BF16;
    case VATTN_DTYPE_FP8_E4M3: return Elem::E4M3;
    case VATTN_DTYPE_FP8_E5M2: return Elem::E5M2;
    default: return Elem::F32;
  }
}

// Model dtypes as DLPack carries them (f32 / f16 / bf16).
inline Elem elem_of_dl(DLDataType t) {
  if (t.code == kDLBfloat) return Elem::BF16;
  return t.bits == 16 ? Elem::F16 : Elem::F32;
}

inline size_t elem_bytes(Elem k) {
  switch (k) {
    case Elem::F32: return 4;
    case Elem::F16:
    case Elem::BF16: return 2;
    default: return 1;
  }
}

// dst[i] = src[i * stride] * scale, i < n.
inline void load_row(const void *src, int64_t stride, int64_t n, Elem k, float scale, float *dst) {
  switch (k) {
    case Elem::F32: {
      const float *p = static_cast<const float *>(src);
      if (stride == 1) {
        for (int64_t i = 0; i < n; ++i) dst[i] = p[i] * scale;
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = p[i * stride] * scale;
      }
      return;
    }
    case Elem::BF16: {
      const uint16_t *p = static_cast<const uint16_t *>(src);
      if (stride == 1) {
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(p[i]) * scale;
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(p[i * stride]) * scale;
      }
      return;
    }
    case Elem::F16: {
      const uint16_t *p = static_cast<const uint16_t *>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(p[i * stride]) * scale;
      return;
    }
    case Elem::E4M3: {
      const uint8_t *p = static_cast<const uint8_t *>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_float(p[i * stride]) * scale;
      return;
    }
    case Elem::E5M2: {
      const uint8_t *p = static_cast<const uint8_t *>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e5m2_to_float(p[i * stride]) * scale;
      return;
    }
  }
}

// dst[i * stride] = convert(src[i] / scale), i < n (scale only matters for fp8).
inline void store_row(const float *src, int64_t n, Elem k, float scale, void *dst, int64_t stride) {
  switch (k) {
    case Elem::F32: {
      float *p = static_cast<float *>(dst);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = src[i];
      return;
    }
    case Elem::BF16: {
      uint16_t *p = static_cast<uint16_t *>(dst);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = float_to_bf16(src[i]);
      return;
    }
    case Elem::F16: {
      uint16_t *p = static_cast<uint16_t *>(dst);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = float_to_half(src[i]);
      return;
    }
    case Elem::E4M3: {
      uint8_t *p = static_cast<uint8_t *>(dst);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = float_to_fp8_e4m3(src[i] / scale);
      return;
    }
    case Elem::E5M2: {
      uint8_t *p = static_cast<uint8_t *>(dst);
      for (int64_t i = 0; i < n; ++i) p[i * stride] = float_to_fp8_e5m2(src[i] / scale);
      return;
    }
  }
}

// Same-kind element copy (bit exact), strided on both sides.
inline void copy_row(const void *src, int64_t src_stride, int64_t n, size_t esize, void *dst,
                     int64_t dst_stride) {
  const char *s = static_cast<const char *>(src);
  char *d = static_cast<char *>(dst);
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * esize);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(d + i * dst_stride * static_cast<int64_t>(esize),
                s + i * src_stride * static_cast<int64_t>(esize), esize);
}

}  // namespace cpu
}  // namespace vattn
