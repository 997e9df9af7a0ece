// attention_dispatch.cuh -- head-size dispatch of attention_kernel for one
// (activation type, cache kind) pair.  Each pair is explicitly instantiated
// in its own attention_<type>_<cache>.cu so the 6 x 2 x 3 grid compiles in
// parallel (6 kernels per translation unit per architecture).
#pragma once

#include <cstring>
#include <type_traits>

#include "attention.cuh"
#include "attention_sm90.cuh"
#include "decode.cuh"

namespace vattn {
namespace kern {

#define VATTN_ATTN_HEAD_SIZES(X) X(64) X(80) X(96) X(112) X(128) X(256)

// The Hopper variant (attention_sm90.cuh) serves 16-bit caches at head
// sizes 64, 128 and 256, and fp8 caches at 128 (key rows of one 128-byte box),
// when sm90_attention_enabled() (compute capability 9.0, VATTN_CUDA_SM90
// not 0); prepare and launch take the same branch.
template <int CACHE, int HS>
constexpr bool has_sm90_variant() {
  return CACHE == kCacheAuto ? HS == 64 || HS == 128 || HS == 256 : HS == 128;
}

template <class T, int CACHE, int HS>
cudaError_t attention_prepare_hs() {
  // Dynamic shared memory above 48 KiB needs an explicit opt-in.
  if constexpr (has_sm90_variant<CACHE, HS>()) {
    if (sm90_attention_enabled())
      return cudaFuncSetAttribute(attention_sm90_kernel<T, CACHE, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(Sm90Shape<HS, CACHE != kCacheAuto>::smem_bytes()));
  }
  return cudaFuncSetAttribute(attention_kernel<T, CACHE, HS>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(AttnShape<HS>::smem_bytes(sizeof(T))));
}

template <class T, int CACHE, int HS>
cudaError_t attention_launch_hs(const AttnParams &p, int grid_x, cudaStream_t s) {
  dim3 grid(grid_x, p.num_kv_heads);
  if constexpr (has_sm90_variant<CACHE, HS>()) {
    if (sm90_attention_enabled()) {
      // Persistent: one CTA per SM at most (grid_x * num_kv_heads bounds the
      // units; the kernel reads their count on the device).
      const int64_t units = static_cast<int64_t>(grid_x) * p.num_kv_heads;
      const int cap = sm90_max_ctas();
      const int ctas = static_cast<int>(units < cap ? units : cap);
      Sm90KvMaps maps;
      sm90_kv_maps(p, HS, &maps, CACHE == kCacheAuto ? 2 : 1);  // maps.use = 0: cp.async only
      using Sh = Sm90Shape<HS, CACHE != kCacheAuto>;
      sm90_q_map(p, HS, Sh::BM, &maps);
      attention_sm90_kernel<T, CACHE, HS><<<ctas, Sh::kThreads, Sh::smem_bytes(), s>>>(p, maps);
      return cudaGetLastError();
    }
  }
  attention_kernel<T, CACHE, HS>
      <<<grid, AttnShape<HS>::kThreads, AttnShape<HS>::smem_bytes(sizeof(T)), s>>>(p);
  return cudaGetLastError();
}

template <class T, int CACHE>
cudaError_t attention_prepare_tc(int hs) {
  switch (hs) {
#define VATTN_X(H) \
  case H: return attention_prepare_hs<T, CACHE, H>();
    VATTN_ATTN_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    default: return cudaErrorNotSupported;
  }
}

template <class T, int CACHE>
cudaError_t attention_launch_tc(const AttnParams &p, int hs, int grid_x, cudaStream_t s) {
  switch (hs) {
#define VATTN_X(H) \
  case H: return attention_launch_hs<T, CACHE, H>(p, grid_x, s);
    VATTN_ATTN_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    default: return cudaErrorNotSupported;
  }
}

// ---- decode kernel (decode.cuh): fewer head sizes, see decode_supported().
#define VATTN_DEC_HEAD_SIZES(X) X(64) X(128) X(256)

// NH: KV heads per CTA, the plan's decode_kv_heads_per_cta; the two-head
// kernel exists where decode_two_head_kernel says (with_decode_kernel).
// The TMA instance (K / V tiles as TMA boxes) serves one-head CTAs whose
// key rows are >= 128 bytes (16-bit caches; fp8 at head size >= 128) when
// sm90_attention_enabled() (compute capability 9.0; VATTN_CUDA_SM90=0
// turns it off with the Hopper prefill) and the launch's tensor maps encode
// (sm90_kv_maps; VATTN_CUDA_SM90_TMA=0 turns TMA off); otherwise the
// cp.async instance runs.  Occupancy is read from the TMA instance where it
// may run.
template <int CACHE, int HS, int NH>
constexpr bool has_decode_tma() {
  return NH == 1 && (CACHE == kCacheAuto || HS >= 128);  // key rows of >= 128 bytes
}

template <class T, int CACHE, int HS, int NH, bool TMA>
cudaError_t decode_prepare_one() {
  return cudaFuncSetAttribute(decode_kernel<T, CACHE, HS, NH, TMA>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(DecShape<HS, CACHE, NH, TMA>::smem_bytes()));
}

template <class T, int CACHE, int HS, int NH>
cudaError_t decode_prepare_hs() {
  if constexpr (has_decode_tma<CACHE, HS, NH>()) {
    if (sm90_attention_enabled()) {
      const cudaError_t e = decode_prepare_one<T, CACHE, HS, NH, true>();
      if (e != cudaSuccess) return e;
    }
  }
  return decode_prepare_one<T, CACHE, HS, NH, false>();
}

template <class T, int CACHE, int HS, int NH>
cudaError_t decode_occupancy_hs(int *ctas) {
  cudaError_t e = decode_prepare_hs<T, CACHE, HS, NH>();
  if (e != cudaSuccess) return e;
  if constexpr (has_decode_tma<CACHE, HS, NH>()) {
    if (sm90_attention_enabled())
      return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas, decode_kernel<T, CACHE, HS, NH, true>,
                                                           DecShape<HS, CACHE, NH, true>::kThreads,
                                                           DecShape<HS, CACHE, NH, true>::smem_bytes());
  }
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas, decode_kernel<T, CACHE, HS, NH, false>,
                                                       DecShape<HS, CACHE, NH>::kThreads,
                                                       DecShape<HS, CACHE, NH>::smem_bytes());
}

template <class T, int CACHE, int HS, int NH>
cudaError_t decode_launch_hs(const AttnParams &p, int grid_x, cudaStream_t s) {
  const dim3 grid(p.num_kv_heads / NH, grid_x);
  Sm90KvMaps maps;
  std::memset(&maps, 0, sizeof(maps));
  if constexpr (has_decode_tma<CACHE, HS, NH>()) {
    if (p.paged && sm90_attention_enabled()) {
      // The boxes' L2 promotion depends on the device (sm90_decode_l2_promo);
      // fp8 at head size 128 and bf16 at 64 (128-byte rows) take 128.
      constexpr int kRowBytes = HS * (CACHE == kCacheAuto ? 2 : 1);
      sm90_kv_maps(p, HS, &maps, CACHE == kCacheAuto ? 2 : 1, sm90_decode_l2_promo(kRowBytes));
      if (maps.use != 0) {
        AttnParams q = p;  // head size 128: the device's lookahead (DecShape::kVarAhead / kAhead16)
        if constexpr (DecShape<HS, CACHE, NH, true>::kVarAhead) q.dec_ahead = decode_fp8_ahead();
        if constexpr (DecShape<HS, CACHE, NH, true>::kAhead16) decode_16bit_ahead(&q.dec_one_ahead_tiles, &q.dec_sms);
        decode_kernel<T, CACHE, HS, NH, true>
            <<<grid, DecShape<HS, CACHE, NH, true>::kThreads, DecShape<HS, CACHE, NH, true>::smem_bytes(), s>>>(q,
                                                                                                              maps);
        return cudaGetLastError();
      }
    }
  }
  decode_kernel<T, CACHE, HS, NH, false>
      <<<grid, DecShape<HS, CACHE, NH>::kThreads, DecShape<HS, CACHE, NH>::smem_bytes(), s>>>(p, maps);
  return cudaGetLastError();
}

// f(HS, NH) -- two std::integral_constant<int> -- for the compiled decode
// kernel of head size hs with nh KV heads per CTA: one head at every head
// size of VATTN_DEC_HEAD_SIZES, two where decode_two_head_kernel says.
// cudaErrorInvalidValue for a CTA shape not compiled at hs,
// cudaErrorNotSupported for other head sizes.
template <class F>
cudaError_t with_decode_kernel(int hs, int nh, F &&f) {
  if (nh != 1 && (nh != 2 || !decode_two_head_kernel(hs))) return cudaErrorInvalidValue;
  using NH1 = std::integral_constant<int, 1>;
  using NH2 = std::integral_constant<int, 2>;
  switch (hs) {
#define VATTN_X(H)                                                                       \
  case H:                                                                                \
    if constexpr (decode_two_head_kernel(H))                                             \
      if (nh == 2) return f(std::integral_constant<int, H>{}, NH2{});                    \
    return f(std::integral_constant<int, H>{}, NH1{});
    VATTN_DEC_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    default: return cudaErrorNotSupported;
  }
}

// Raises the shared-memory limit of every decode kernel of head size hs.
template <class T, int CACHE>
cudaError_t decode_prepare_tc(int hs) {
  auto prepare = [](auto H, auto N) { return decode_prepare_hs<T, CACHE, decltype(H)::value, decltype(N)::value>(); };
  const cudaError_t e = with_decode_kernel(hs, 1, prepare);
  return e != cudaSuccess || !decode_two_head_kernel(hs) ? e : with_decode_kernel(hs, 2, prepare);
}

template <class T, int CACHE>
cudaError_t decode_occupancy_tc(int hs, int nh, int *ctas) {
  return with_decode_kernel(hs, nh, [ctas](auto H, auto N) {
    return decode_occupancy_hs<T, CACHE, decltype(H)::value, decltype(N)::value>(ctas);
  });
}

template <class T, int CACHE>
cudaError_t decode_launch_tc(const AttnParams &p, int hs, int nh, int grid_x, cudaStream_t s) {
  return with_decode_kernel(hs, nh, [&p, grid_x, s](auto H, auto N) {
    return decode_launch_hs<T, CACHE, decltype(H)::value, decltype(N)::value>(p, grid_x, s);
  });
}

// Defined (explicitly instantiated) in attention_<type>_<cache>.cu.
#define VATTN_ATTN_DECLARE(T, C)                                                        \
  extern template cudaError_t attention_prepare_tc<T, C>(int);                          \
  extern template cudaError_t attention_launch_tc<T, C>(const AttnParams &, int, int, \
                                                        cudaStream_t);                  \
  extern template cudaError_t decode_prepare_tc<T, C>(int);                             \
  extern template cudaError_t decode_occupancy_tc<T, C>(int, int, int *);               \
  extern template cudaError_t decode_launch_tc<T, C>(const AttnParams &, int, int, int, cudaStream_t);
#define VATTN_ATTN_INSTANTIATE(T, C)                                             \
  template cudaError_t attention_prepare_tc<T, C>(int);                          \
  template cudaError_t attention_launch_tc<T, C>(const AttnParams &, int, int, \
                                                 cudaStream_t);                  \
  template cudaError_t decode_prepare_tc<T, C>(int);                             \
  template cudaError_t decode_occupancy_tc<T, C>(int, int, int *);               \
  template cudaError_t decode_launch_tc<T, C>(const AttnParams &, int, int, int, cudaStream_t);

}  // namespace kern
}  // namespace vattn
