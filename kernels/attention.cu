// attention.cu -- dtype / cache-kind dispatch of the attention kernels and the
// plan's merge pass.
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {

constexpr int kMaxDevices = 64;

VATTN_ATTN_DECLARE(__half, kCacheAuto)
VATTN_ATTN_DECLARE(__half, kCacheE4M3)
VATTN_ATTN_DECLARE(__half, kCacheE5M2)
VATTN_ATTN_DECLARE(__nv_bfloat16, kCacheAuto)
VATTN_ATTN_DECLARE(__nv_bfloat16, kCacheE4M3)
VATTN_ATTN_DECLARE(__nv_bfloat16, kCacheE5M2)

bool attention_supported(int32_t elem, int32_t cache, int32_t hs) {
  if (elem != kF16 && elem != kBF16) return false;
  if (cache < kCacheAuto || cache > kCacheE5M2) return false;
  switch (hs) {
#define VATTN_X(H) case H:
    VATTN_ATTN_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    return true;
    default: return false;
  }
}

// The current device (-1 when it cannot be asked or is out of the caches' range).
static int current_device() {
  int dev = 0;
  return cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < kMaxDevices ? dev : -1;
}

// Attribute A of device dev (0 <= dev < kMaxDevices), queried once per device
// (racing first queries store the same value); -1 when the query fails.
template <cudaDeviceAttr A>
static int device_attr(int dev) {
  static std::atomic<int> cache[kMaxDevices];  // value + 2; 1: failed; 0: not asked yet
  int c = cache[dev].load(std::memory_order_relaxed);
  if (c == 0) {
    int v = 0;
    c = cudaDeviceGetAttribute(&v, A, dev) == cudaSuccess && v >= 0 ? v + 2 : 1;
    cache[dev].store(c, std::memory_order_relaxed);
  }
  return c - 2;
}

// False when environment variable `name` is exactly "0" (the switches that
// tests use to run the fallback paths); read once per switch by its caller.
static bool env_switch_on(const char *name) {
  const char *e = std::getenv(name);
  return !(e && e[0] == '0' && e[1] == '\0');
}

bool sm90_attention_enabled_on(int dev) {
  static const bool env_on = env_switch_on("VATTN_CUDA_SM90");
  if (!env_on) return false;
  return dev >= 0 && dev < kMaxDevices && device_attr<cudaDevAttrComputeCapabilityMajor>(dev) == 9 &&
         device_attr<cudaDevAttrComputeCapabilityMinor>(dev) == 0;
}

bool sm90_attention_enabled() { return sm90_attention_enabled_on(current_device()); }

int sm90_max_ctas() {
  // VATTN_CUDA_SM90_CTAS=<n> caps the grid (tests use a few CTAs so that
  // each one runs many units).
  static const int env_cap = [] {
    const char *e = std::getenv("VATTN_CUDA_SM90_CTAS");
    const long v = e ? std::strtol(e, nullptr, 10) : 0;
    return v > 0 && v < (1 << 20) ? static_cast<int>(v) : 0;
  }();
  const int dev = current_device();
  const int sms = dev >= 0 ? device_attr<cudaDevAttrMultiProcessorCount>(dev) : -1;
  const int n = sms >= 1 ? sms : 1;
  return env_cap > 0 && env_cap < n ? env_cap : n;
}

// The driver's tensor map encoder, looked up once (no link against
// libcuda); null when the driver has none or VATTN_CUDA_SM90_TMA=0 (every
// row then goes by cp.async; tests cover both).
static PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    if (!env_switch_on("VATTN_CUDA_SM90_TMA")) return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// Encodes a 4-d tiled map with 128-byte swizzle, no interleave and no
// out-of-bounds fill: dims innermost first, byte strides of dims 1..3, the box
// in elements.  False (the map is then never read) when the driver has no
// encoder, the base is not 16-byte aligned, a stride is not a positive
// multiple of 16 below 2^40, or the driver refuses the map.
static bool encode_map_4d(CUtensorMap *map, CUtensorMapDataType dt, const void *base,
                          const int64_t dims[4], const int64_t byte_strides[3], const int box[4],
                          CUtensorMapL2promotion promo) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder();
  if (encode == nullptr || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  cuuint64_t d[4], st[3];
  cuuint32_t bx[4];
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    if (dims[i] < 1 || box[i] < 1) return false;
    d[i] = static_cast<cuuint64_t>(dims[i]);
    bx[i] = static_cast<cuuint32_t>(box[i]);
  }
  for (int i = 0; i < 3; ++i) {
    const int64_t x = byte_strides[i];
    if (x <= 0 || x % 16 != 0 || x >= (int64_t{1} << 40)) return false;
    st[i] = static_cast<cuuint64_t>(x);
  }
  return encode(map, dt, 4, const_cast<void *>(base), d, st, bx, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Environment variable `name` when it is exactly a or b (A/B switches), else 0.
static int env_choice(const char *name, int a, int b) {
  const char *e = std::getenv(name);
  const long v = e ? std::strtol(e, nullptr, 10) : 0;
  return v == a || v == b ? static_cast<int>(v) : 0;
}

// Whether the current device's memory bus is at most the H100's 5120 bits:
// the decode settings measured on the H100 (less bandwidth per SM) are kept
// there, the H200's elsewhere.
static bool h100_bus() {
  const int dev = current_device();
  const int bus = dev >= 0 ? device_attr<cudaDevAttrGlobalMemoryBusWidth>(dev) : -1;
  return bus > 0 && bus <= 5120;
}

// A key row of >= 256 bytes (16-bit caches at head size >= 128) is two or
// four boxes' 128-byte rows.  Fetching 256 bytes into L2 per box row helped
// a little on the H100 and cost a lot on the H200, so it is chosen per
// device.  Same-run A/Bs, eager us, 128 -> 256 bytes:
// - H100 80GB HBM3 (a 5120-bit bus by its specification; the attribute was
//   not read there), 3 rounds: 32x4096 184.3-184.5 -> 183.1-183.2, 64x2048
//   185.7 -> 184.2-184.3, 128x1024 187.3-187.6 -> 186.5-186.7, 1x32768
//   54.6-54.9 -> 54.2-54.6, 8 x 2k-32k 211.4-211.8 -> 210.1-210.5, 8x8192
//   the same;
// - H200 (HBM3e, the attribute reads 6016 bits), 2 rounds: 32x4096
//   125.6-126.0 -> 137.0, 8x8192 70.0-70.3 -> 75.2-75.4, 128x1024
//   129.6-129.7 -> 138.3, 1x32768 40.2-40.3 -> 42.5-42.7, 256x512
//   130.2-130.3 -> 136.3-136.4, head size 256 32x4096 247.8-247.9 -> 269.9.
// 256 bytes only where the memory bus is at most the H100's 5120 bits; a
// device not measured loses less with 128 if that is the wrong guess.
// VATTN_CUDA_DECODE_L2_PROMO=128 or 256 forces one (A/Bs).
int sm90_decode_l2_promo(int row_bytes) {
  if (row_bytes < 256) return 128;
  static const int forced = env_choice("VATTN_CUDA_DECODE_L2_PROMO", 128, 256);
  if (forced != 0) return forced;
  return h100_bus() ? 256 : 128;
}

// fp8 decode at head size 128 (TMA, three stages): how many tiles a warp
// keeps in flight ahead of the one it computes, for items that cover their
// rows' keys (split parts keep one; decode.cuh).  On the H100, deeper fp8
// pipelines than two stages measured slower (issue 5, sessions 8-15: e.g.
// three stages on TMA, 32x4096 98.6 -> 100.5 us), so one.  On the H200 two:
// same-run A/B against the two-stage kernel, eager us, 3 rounds (default /
// forced 1 / two-stage): 32x4096 72.1-72.4 / 73.4-74.0 / 74.0-74.4,
// 128x4096 273.7-274.5 / 280.8-281.8 / 282.4-283.3, 256x512 92.7-92.9 /
// 94.1-94.2 / 94.2-94.6, 64x2048 75.9-76.2 / 77.0-77.1 / 77.4-77.7; split
// plans the same (8x8192, 1x32768, 4x8192).  Two ahead for split parts
// too was up to 3% slower on one-wave split plans (1 KV head 16x8192
// 20.2-20.3 -> 20.8-21.0, 1x4096 12.75 -> 12.98-13.01).
int decode_fp8_ahead() {
  static const int forced = env_choice("VATTN_CUDA_DECODE_FP8_AHEAD", 1, 2);
  if (forced != 0) return forced;
  return h100_bus() ? 1 : 2;
}

// 16-bit decode at head size 128 (TMA, three stages): a warp keeps two
// tiles in flight ahead of the one it computes, or one for an item of at
// least 4 x 32 tiles (2048 keys) in a launch of more working CTAs than SMs.
// On the H200 one ahead streamed the long items of plans with two CTAs per
// SM faster, and cost lone CTAs (one per SM) and short items.  Same-binary
// A/Bs, eager us, two ahead everywhere / one ahead everywhere / this rule
// (docs/benchmarks.md, session 32):
// - survey, one machine, 1-2 rounds: 128x4096 484.5 / 479.5 / 478.1, in
//   order 478.6 / 477.3 / 477.1, 128x2048 248.3 / 246.5 / 246.2, 64x2048
//   128.3 / 127.7 / 128.0, 24x4096
//   (SMs with one or two CTAs) 104.4-104.9 / 101.7-102.4 / 101.3-101.9;
//   lone or short: 256x512 129.7-129.9 / 131.5-131.6 / 129.9, 16x8192
//   126.1 / 128.1-128.4 / 126.2-126.3, 1x32768 39.6-39.7 / 40.3-40.5 /
//   39.5, 4x16384 69.7 / 70.8-70.9 / 69.6-69.9; the rule within 0.5% of
//   two ahead on 32x4096, 64x4096, 96x4096, 32x8192, 128x1024, 256x1024,
//   512x512, 8x8192, 48x8192 and two mixed-length batches;
// - the landed code, another machine, 1 round: 128x4096 498.0 / 494.8 /
//   494.9, 64x2048 133.1 / 131.2 / 131.2, 24x4096 102.5 / 99.7 / 100.2,
//   32x4096 128.9 / 128.2 / 128.2; 256x512 133.2 / 134.7 / 132.9, 16x8192
//   130.0 / 131.6 / 130.1, 1x32768 40.7 / 41.2 / 40.5.
// Not measured on the H100 (a bus of at most 5120 bits): two ahead there,
// its setting since session 15.
void decode_16bit_ahead(int32_t *tiles, int32_t *sms) {
  static const int forced = env_choice("VATTN_CUDA_DECODE_AHEAD16", 1, 2);
  *tiles = 0;
  *sms = 0;
  if (forced == 1) {
    *tiles = 1;  // every item, whatever the launch
    return;
  }
  if (forced == 2 || h100_bus()) return;
  *tiles = 32;
  const int dev = current_device();
  const int n = dev >= 0 ? device_attr<cudaDevAttrMultiProcessorCount>(dev) : 0;
  *sms = n > 0 ? n : 0;
}

void sm90_kv_maps(const AttnParams &p, int hs, Sm90KvMaps *m, int elem_bytes, int l2_promo) {
  std::memset(m, 0, sizeof(*m));
  // Paged: [blocks][block_size][kv heads][head size]; dense: [rows][kv
  // heads][head size] as [1][rows][kv heads][head size].  Coordinates are
  // 32-bit.
  const int64_t rows = p.paged ? p.block_size : p.kv_extent, outer = p.paged ? p.kv_extent : 1;
  if ((elem_bytes != 1 && elem_bytes != 2) || hs * elem_bytes % 128 != 0 ||
      (p.paged && p.block_size % 16 != 0) || rows < 16 || outer < 1 ||
      rows * outer > (int64_t{1} << 31) - 1)
    return;
  const int64_t E = elem_bytes;
  const int64_t dims[4] = {hs, p.num_kv_heads, rows, outer};
  const int box[4] = {static_cast<int>(128 / E), 1, 16, 1};  // 128-byte rows
  const CUtensorMapDataType dt = E == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const CUtensorMapL2promotion promo =
      l2_promo == 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  auto one = [&](CUtensorMap *map, const void *base, int64_t s_block, int64_t s_tok, int64_t s_head) {
    const int64_t st[3] = {s_head * E, s_tok * E, p.paged ? s_block * E : rows * s_tok * E};
    return encode_map_4d(map, dt, base, dims, st, box, promo);
  };
  if (!one(&m->k, p.k, p.k_stride_block, p.k_stride_tok, p.k_stride_head) ||
      !one(&m->v, p.v, p.v_stride_block, p.v_stride_tok, p.v_stride_head))
    return;  // m->use stays 0: a half-written map is never read
  m->use = 1;
  m->seg_rows = static_cast<int32_t>(rows);
}

void sm90_q_map(const AttnParams &p, int hs, int bm, Sm90KvMaps *m) {
  m->q_use = 0;
  const int64_t G = p.group, T = p.q_extent, E = 2;
  if (G < 1 || bm % G != 0 || G > 256 || bm / G > 256 || hs * E % 128 != 0 || T < 1 ||
      T > (int64_t{1} << 31) - 1 || p.num_heads < G)
    return;
  // Q as [1][tokens][heads][head size]; a box is 64 columns x G heads x
  // bm / G tokens, the Q buffer's layout.  Tokens past T read as zeros (a
  // unit's rows past the request are never stored; inside T they hold the
  // next request's queries, also unused).
  const int64_t dims[4] = {hs, p.num_heads, T, 1};
  const int64_t st[3] = {p.q_stride_head * E, p.q_stride_tok * E, T * p.q_stride_tok * E};
  const int box[4] = {64, static_cast<int>(G), static_cast<int>(bm / G), 1};
  m->q_use = encode_map_4d(&m->q, CU_TENSOR_MAP_DATA_TYPE_UINT16, p.q, dims, st, box,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B)
                 ? 1
                 : 0;
}

int32_t attention_rows_per_tile(int32_t hs, int32_t cache, int32_t device) {
  const bool fp8 = cache != kCacheAuto;
  switch (hs) {
#define VATTN_X(H)                                                                                      \
  case H:                                                                                               \
    if ((fp8 ? has_sm90_variant<kCacheE4M3, H>() : has_sm90_variant<kCacheAuto, H>()) &&                \
        sm90_attention_enabled_on(device))                                                              \
      return kAttnMaxItemRows; /* the Hopper kernel's BM (asserted in Sm90Shape) */                    \
    return AttnShape<H>::BM;
    VATTN_ATTN_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    default: return kAttnRowsPerTile;
  }
}

template <class T>
static cudaError_t prepare_t(int32_t cache, int32_t hs) {
  switch (cache) {
    case kCacheAuto: return attention_prepare_tc<T, kCacheAuto>(hs);
    case kCacheE4M3: return attention_prepare_tc<T, kCacheE4M3>(hs);
    case kCacheE5M2: return attention_prepare_tc<T, kCacheE5M2>(hs);
    default: return cudaErrorNotSupported;
  }
}

template <class T>
static cudaError_t launch_t(const AttnParams &p, int32_t cache, int32_t hs, int grid_x,
                            cudaStream_t s) {
  switch (cache) {
    case kCacheAuto: return attention_launch_tc<T, kCacheAuto>(p, hs, grid_x, s);
    case kCacheE4M3: return attention_launch_tc<T, kCacheE4M3>(p, hs, grid_x, s);
    case kCacheE5M2: return attention_launch_tc<T, kCacheE5M2>(p, hs, grid_x, s);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t attention_prepare(int32_t elem, int32_t cache, int32_t hs) {
  switch (elem) {
    case kF16: return prepare_t<__half>(cache, hs);
    case kBF16: return prepare_t<__nv_bfloat16>(cache, hs);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t launch_attention(const AttnParams &p, int32_t elem, int32_t cache, int32_t hs,
                             int32_t grid_x, cudaStream_t s) {
  if (grid_x < 1) grid_x = 1;
  switch (elem) {
    case kF16: return launch_t<__half>(p, cache, hs, grid_x, s);
    case kBF16: return launch_t<__nv_bfloat16>(p, cache, hs, grid_x, s);
    default: return cudaErrorNotSupported;
  }
}

bool decode_supported(int32_t elem, int32_t cache, int32_t hs) {
  if (elem != kF16 && elem != kBF16) return false;
  if (cache < kCacheAuto || cache > kCacheE5M2) return false;
  switch (hs) {
#define VATTN_X(H) case H:
    VATTN_DEC_HEAD_SIZES(VATTN_X)
#undef VATTN_X
    return true;
    default: return false;
  }
}

template <class T>
static cudaError_t dec_prepare_t(int32_t cache, int32_t hs) {
  switch (cache) {
    case kCacheAuto: return decode_prepare_tc<T, kCacheAuto>(hs);
    case kCacheE4M3: return decode_prepare_tc<T, kCacheE4M3>(hs);
    case kCacheE5M2: return decode_prepare_tc<T, kCacheE5M2>(hs);
    default: return cudaErrorNotSupported;
  }
}

template <class T>
static cudaError_t dec_launch_t(const AttnParams &p, int32_t cache, int32_t hs, int nh, int grid_x,
                                cudaStream_t s) {
  switch (cache) {
    case kCacheAuto: return decode_launch_tc<T, kCacheAuto>(p, hs, nh, grid_x, s);
    case kCacheE4M3: return decode_launch_tc<T, kCacheE4M3>(p, hs, nh, grid_x, s);
    case kCacheE5M2: return decode_launch_tc<T, kCacheE5M2>(p, hs, nh, grid_x, s);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t decode_prepare(int32_t elem, int32_t cache, int32_t hs) {
  if (!decode_supported(elem, cache, hs)) return cudaErrorNotSupported;
  return elem == kF16 ? dec_prepare_t<__half>(cache, hs) : dec_prepare_t<__nv_bfloat16>(cache, hs);
}

cudaError_t decode_ctas_per_sm(int32_t hs, int32_t nh, int32_t *out) {
  if (!decode_supported(kBF16, kCacheAuto, hs)) return cudaErrorNotSupported;
  // fp16 and bf16 instances share their shapes; the cache kinds differ.
  int best = 0;
  const int kinds[3] = {kCacheAuto, kCacheE4M3, kCacheE5M2};
  for (int i = 0; i < 3; ++i) {
    int n = 0;
    cudaError_t e = kinds[i] == kCacheAuto   ? decode_occupancy_tc<__nv_bfloat16, kCacheAuto>(hs, nh, &n)
                    : kinds[i] == kCacheE4M3 ? decode_occupancy_tc<__nv_bfloat16, kCacheE4M3>(hs, nh, &n)
                                             : decode_occupancy_tc<__nv_bfloat16, kCacheE5M2>(hs, nh, &n);
    if (e != cudaSuccess) return e;
    best = i == 0 ? n : (n < best ? n : best);
  }
  *out = best;
  return cudaSuccess;
}

cudaError_t launch_decode(const AttnParams &p, int32_t elem, int32_t cache, int32_t hs,
                          int32_t nh, int32_t grid_x, cudaStream_t s) {
  if (!decode_supported(elem, cache, hs)) return cudaErrorNotSupported;
  // The plan's shape: two heads per CTA only where decode_kv_heads_per_cta
  // can pick it.
  if (nh != 1 && (nh != 2 || !decode_two_head_shape(hs, p.num_kv_heads, p.group))) return cudaErrorInvalidValue;
  if (grid_x < 1) grid_x = 1;
  return elem == kF16 ? dec_launch_t<__half>(p, cache, hs, nh, grid_x, s)
                      : dec_launch_t<__nv_bfloat16>(p, cache, hs, nh, grid_x, s);
}

cudaError_t launch_plan_merge(const PlanMergeParams &p, int32_t elem, int32_t grid_x,
                              cudaStream_t s) {
  if (grid_x < 1) grid_x = 1;
  switch (elem) {
    case kF16: plan_merge_kernel<__half><<<grid_x, 128, 0, s>>>(p); break;
    case kBF16: plan_merge_kernel<__nv_bfloat16><<<grid_x, 128, 0, s>>>(p); break;
    default: return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

}  // namespace kern
}  // namespace vattn
