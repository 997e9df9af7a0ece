// common.cuh -- element types, conversions and small PTX wrappers shared by
// every kernel family.  Device code only; host code includes launch.h.
//
// Conventions of every kernel in kernels/:
//  - pointers are raw, sizes and strides are in ELEMENTS of the pointed-to
//    type (int64), a launcher takes the stream last and returns cudaError_t;
//  - 16-bit activations are __half or __nv_bfloat16, fp8 caches are bytes
//    (uint8_t) interpreted as e4m3 or e5m2; all arithmetic is fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "launch.h"

namespace vattn {
namespace kern {

// ---- 16-bit element types --------------------------------------------------
template <class T>
struct Elem;
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
  // Two floats -> one 32-bit register holding (lo, hi) as this type.
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
  }
};
template <>
struct Elem<float> {
  static __device__ __forceinline__ float to_f(float x) { return x; }
  static __device__ __forceinline__ float from_f(float x) { return x; }
};

// ---- fp8 ---------------------------------------------------------------------
// FP8 caches store saturate(x / scale) rounded to nearest even (cuda_fp8.h
// conversions with __NV_SATFINITE: +-inf and overflow clamp to +-max, NaN
// stays NaN), exactly as the CPU backend does.  Decoding to half is exact for
// both formats, and half -> bf16 is exact for every fp8 value too.
template <int KIND>
struct Fp8;
template <>
struct Fp8<kCacheE4M3> {
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E4M3;
};
template <>
struct Fp8<kCacheE5M2> {
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E5M2;
};

// x -> fp8 with the encoding above, in integer and float arithmetic: the
// same byte as cuda_fp8.h's conversion for every float but NaN, which
// gives a NaN byte (tests/gpu_kernels compares all 2^32), without that
// conversion's emulation before sm_89 (with it the fp8 cache write ran
// 2.2-2.5x slower as compute_80 code on the H100).  M: mantissa bits, B:
// exponent bias; normal results round the float's bits to
// nearest even at mantissa bit M and rebias, subnormal ones (below
// 2^(1 - B)) are rint(|x| / 2^(1 - B - M)); past the largest finite value
// (and +-inf) they saturate, NaN stays NaN.
template <int KIND>
__device__ __forceinline__ uint8_t fp8_encode_soft(float x) {
  constexpr int M = KIND == kCacheE4M3 ? 3 : 2, B = KIND == kCacheE4M3 ? 7 : 15;
  constexpr uint32_t kMax = KIND == kCacheE4M3 ? 0x7e : 0x7b, kNaN = 0x7f;
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  uint32_t r;
  if (a > 0x7f800000u) {
    r = kNaN;
  } else if (a < static_cast<uint32_t>(128 - B) << 23) {  // below 2^(1 - B): subnormal (or zero)
    r = static_cast<uint32_t>(__float2int_rn(__uint_as_float(a) * static_cast<float>(1 << (B + M - 1))));
  } else {
    const uint32_t sh = 23 - M;
    r = (a + ((1u << (sh - 1)) - 1) + ((a >> sh) & 1u)) >> sh;  // round to nearest even
    r -= static_cast<uint32_t>(127 - B) << M;                    // rebias
    r = min(r, kMax);
  }
  return static_cast<uint8_t>(r | sign);
}

template <int KIND>
__device__ __forceinline__ uint8_t fp8_encode(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  return fp8_encode_soft<KIND>(x);
#else
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, Fp8<KIND>::kInterp));
#endif
}

// Two e4m3 bytes (the low bytes of the 16-bit halves of u, high bytes zero)
// -> f16x2, exact, in integer and one f16x2 multiply (GPUs without the
// sm_89 conversion instruction, where cuda_fp8.h's conversion spilled the
// head-size-256 decode kernel: 916 bytes at sm_80).  The magnitude bits
// eeee mmm moved to f16 bits 13..7 read as 2^(e - 15) (1 + m / 8), or 2^-14
// m / 8 for e = 0; times 2^8 that is the e4m3 value (bias 7), normal or
// not.  The sign moves to bit 15; magnitude 0x7f (NaN in e4m3) gives the f16
// NaN 0x7e00 with the sign.  tests/gpu_kernels checks every byte pair.
__device__ __forceinline__ uint32_t e4m3x2_to_h2_soft(uint32_t u) {
  const uint32_t mag = u & 0x007f007fu;
  const uint32_t sign = (u & 0x00800080u) << 8;
  __half2 h;
  const uint32_t sh = mag << 7;
  memcpy(&h, &sh, 4);
  h = __hmul2(h, __halves2half2(__ushort_as_half(0x5c00), __ushort_as_half(0x5c00)));  // x 256
  uint32_t r;
  memcpy(&r, &h, 4);
  r |= sign;
  // Lanes whose magnitude is 0x7f: 0xffff there, 0 elsewhere.
  const uint32_t x = mag ^ 0x007f007fu;  // 0 in a NaN lane
  const uint32_t nan = ((((x | 0x80008000u) - 0x00010001u) & 0x80008000u) ^ 0x80008000u) >> 15;
  const uint32_t mask = nan * 0xffffu;
  return (r & ~mask) | (mask & (0x7e007e00u | sign));
}

// Four fp8 bytes [b0 b1 b2 b3] (low byte first) -> lo = f16x2(b0, b1), hi =
// f16x2(b2, b3), exact, for both kernels that decode staged cache bytes
// (decode.cuh per mma operand, attention.cuh per staged word): e5m2 is the
// high byte of an f16 (one byte permute per pair); e4m3 is the pair
// conversion on sm_89+ and e4m3x2_to_h2_soft before.
template <int KIND>
__device__ __forceinline__ void fp8x4_to_h2(uint32_t w, uint32_t &lo, uint32_t &hi) {
  if constexpr (KIND == kCacheE5M2) {
    lo = __byte_perm(w, 0u, 0x1404);  // [0, b0, 0, b1]
    hi = __byte_perm(w, 0u, 0x3424);  // [0, b2, 0, b3]
  } else {  // kCacheE4M3
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    // The two halves of w as 16-bit operands of the conversion: ptxas then
    // reads the high half in place (the intrinsic on w >> 16 cost a shift
    // per conversion pair, 32 per warp and 16-key tile of the decode kernel
    // at head size 128).
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
#else
    lo = e4m3x2_to_h2_soft(__byte_perm(w, 0u, 0x4140));  // [b0, 0, b1, 0]
    hi = e4m3x2_to_h2_soft(__byte_perm(w, 0u, 0x4342));  // [b2, 0, b3, 0]
#endif
  }
}

// f16x2 bits -> T x 2 (T = __half: the same bits; bf16: exact for every
// value an fp8 byte decodes to).
template <class T>
__device__ __forceinline__ uint32_t h2_bits_as(uint32_t h) {
  if constexpr (std::is_same<T, __half>::value) {
    return h;
  } else {
    __half2 hh;
    memcpy(&hh, &h, 4);
    const float2 f = __half22float2(hh);
    return Elem<T>::pack2(f.x, f.y);
  }
}

// bf16x2 bits -> f16x2 bits (the fp16 products of fp8 caches take bf16 Q
// this way: exact for |x| in [2^-14, 65504]).
__device__ __forceinline__ uint32_t bf16x2_as_h2(uint32_t b) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&b));
  return Elem<__half>::pack2(f.x, f.y);
}

// ---- PTX wrappers (sm_80+) -----------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy of n bytes (16, or 0 to zero-fill the
// destination), to a shared-space address.  PF = 128: the copy also asks L2
// to fetch the whole aligned 128-byte line (for rows of >= 128 contiguous
// bytes that are read entirely: fewer, larger DRAM requests).
template <int PF = 0>
__device__ __forceinline__ void cp_async_16_s(uint32_t smem, const void *gmem, int n) {
  static_assert(PF == 0 || PF == 128, "L2 prefetch size");
  if constexpr (PF == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(n));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(n));
}
// The old value of *p, which goes up by one (relaxed, device scope), as one
// instruction whose result is waited for only where it is first read.
// (atomicAdd, and atom.add in PTX, from a single lane became ptxas's
// warp-aggregated atomic, which shuffles the result at once and so waits
// for the atomic's round trip there; atom.inc is not aggregated.  *p stays
// below 2^31 - 1, where inc adds one.)
__device__ __forceinline__ int atom_inc_relaxed_gpu(int *p) {
  unsigned old;
  asm volatile("atom.relaxed.gpu.global.inc.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(0x7fffffffu) : "memory");
  return static_cast<int>(old);
}
// An L2 cache policy that evicts the lines it tags first: for data read once
// (the decode kernel's K / V stream), so it does not push out what is read
// again (the block tables, Q, the split partials).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}
// cp_async_16_s with an L2 cache policy (l2_evict_first_policy()).
template <int PF = 0>
__device__ __forceinline__ void cp_async_16_pol(uint32_t smem, const void *gmem, int n, uint64_t pol) {
  static_assert(PF == 0 || PF == 128, "L2 prefetch size");
  if constexpr (PF == 128)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::128B [%0], [%1], 16, %2, %3;\n" ::"r"(smem),
                 "l"(gmem), "r"(n), "l"(pol));
  else
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem), "l"(gmem),
                 "r"(n), "l"(pol));
}
// The same from a generic pointer; valid == false zero-fills.
__device__ __forceinline__ void cp_async_16(void *smem, const void *gmem, bool valid) {
  cp_async_16_s(smem_u32(smem), gmem, valid ? 16 : 0);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem)));
}

// D(16x8 f32) += A(16x16, row) * B(16x8, col) on tensor cores.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

}  // namespace kern
}  // namespace vattn
