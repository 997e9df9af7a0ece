// attention.cuh -- one tensor-core kernel for every attention path: decode
// (split-KV / flash-decoding), prefill, chunked prefill and prefix-cached
// prefill over the paged cache, mixed batches, cascade passes, encoder
// (non-causal varlen over K/V tensors), encoder-only (two-sided window) and
// cross-attention.
//
// Work decomposition (built on the host by the plan, see launch.h):
//   grid = (grid_x, num_kv_heads); CTA (x, kvh) walks items x, x + grid_x,
//   ... < *num_items (the count lives on the device, so a captured graph
//   replays any batch).  An item = up to BM query rows of one request
//   (BM = 128 for head sizes <= 128, 64 above; attention_rows_per_tile();
//   an item of a plan built for the Hopper kernel, up to 128 rows at head
//   size 256, runs as two ranges of BM rows), where row = token * G + g
//   packs the G query heads of KV head kvh (GQA heads share every K/V tile
//   they load), against keys [kv_begin, kv_end).
//
// CTA = 4 warps; warp w owns rows [16 MT w, 16 MT (w + 1)) as MT m16 tiles
// (MT = BM / 64), so each K / V fragment read from shared memory feeds MT
// mma.  Keys stream through a kStages-buffer pipeline of BN-key tiles:
// tile t + kStages - 1 is fetched (16-byte cp.async for 16-bit caches; 16-byte loads + exact
// fp8 -> T conversion for fp8 caches; keys past the range zero-filled so no
// garbage reaches P V) while tile t is computed, one CTA barrier per tile:
//   S = Q K^T with mma.m16n8k16 (Q and K fragments via ldmatrix);
//   scale, soft-cap, ALiBi, mask; online softmax in base 2 (fp32), with an
//   unmasked path for tiles the warp sees whole and lazy rescaling
//   (softmax.cuh); warps skip tiles none of their rows can see;
//   O += P V with P re-packed from the S accumulators (no shared round trip).
// Shapes: shared Q [BM][D+8], kStages (3) x (K [BN][D+8], V [BN][D+8])
// elements of T (the +8 pad makes ldmatrix rows hit distinct banks), then
// kStages x BN (K, V) int64 element offsets (one block lookup per key);
// BN = 64 up to head size 96, 32 up to 128, 16 at 256 (registers: O is
// MT D/2 fp32 per thread; shared memory: two CTAs per SM).
//
// Split decode tiles (AttnItem::merge) merge themselves: see
// merge_split_tile below.
//
// fp8 caches: K and V are decoded exactly to T; k_scale multiplies the
// score and v_scale the output, so dequantisation costs no extra rounding.
//
// Masks (qpos = q_pos0 + token index in the request, j = key position):
//   causal (request flag and allow_causal): j <= qpos
//   window_left >= 0: qpos - j <= window_left   (sliding window - 1)
//   window_right >= 0: j - qpos <= window_right (encoder-only two-sided)
// Score: s = scale * k_scale * q.k; soft-cap: s = cap * tanh(s / cap); then
// ALiBi adds slope_h * (j - qpos).  Sinks join the softmax denominator only
// and are applied where the final output is written (here for items with
// ws_base < 0, else in the merge pass).
#pragma once

#include <type_traits>

#include "common.cuh"
#include "attention_item.cuh"
#include "softmax.cuh"

namespace vattn {
namespace kern {

template <int HS>
struct AttnShape {
  // m16 row tiles per warp: 2 (32 rows) halves the shared-memory reads per
  // mma (each K / V fragment feeds two tiles); head size 256 keeps 1 to fit
  // its D/2 fp32 output accumulators per tile in registers.
  static constexpr int MT = HS <= 128 ? 2 : 1;
  static constexpr int BM = 64 * MT;
  // Keys per tile: bounded by registers (S is MT x BN/2 fp32 per thread)
  // and by shared memory (two CTAs per SM: <= ~113 KiB each).  Measured on
  // the H200 at head size 128: 64 keys with 2 buffers and 48 keys were not
  // faster than 32 keys with 3 buffers (docs/benchmarks.md).
  static constexpr int BN = HS >= 256 ? 16 : HS > 96 ? 32 : 64;
  static constexpr int SROW = HS + 8;  // shared row stride in elements
  static constexpr int kThreads = 128;
  // K/V tile buffers: tile t + 2 is loaded while t is computed, into the
  // buffer of t - 1, which every warp left before the barrier of step t
  // (one barrier per tile).
  static constexpr int kStages = 3;
  static constexpr size_t smem_bytes(size_t elem_bytes) {
    return static_cast<size_t>(BM + kStages * 2 * BN) * SROW * elem_bytes + kOffBytes;
  }
  // Per-key K / V element offsets of the next kStages tiles (int64 pairs).
  static constexpr int kOffBytes = kStages * BN * 16;
  static_assert((BM + kStages * 2 * BN) * SROW * 2 + kOffBytes <= 113 * 1024, "two CTAs per SM");
  static_assert(kStages >= 2, "prefetch distance kStages - 1 >= 1");
};

template <class T, int CACHE, int HS>
__global__ void __launch_bounds__(128, 2) attention_kernel(const AttnParams p) {
  using S = AttnShape<HS>;
  constexpr int MT = S::MT, BM = S::BM, BN = S::BN, SROW = S::SROW;
  constexpr int DF = HS / 8;  // 8-wide output fragments
  constexpr int NF = BN / 8;  // 8-wide score fragments
  constexpr int KV_STAGE = 2 * BN * SROW;  // elements: K rows then V rows
  using KVT = typename std::conditional<CACHE == kCacheAuto, T, uint8_t>::type;

  extern __shared__ uint4 smem_u4[];
  T *sQ = reinterpret_cast<T *>(smem_u4);
  T *sKV = sQ + BM * SROW;
  // sOff[(t % kStages) * BN + r] = (K, V) element offsets of key r of tile t
  // (block lookup and stride products done once per key, not per chunk).
  longlong2 *sOff = reinterpret_cast<longlong2 *>(sKV + S::kStages * KV_STAGE);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates
  const int kvh = blockIdx.y;
  const int n_items = *p.num_items;
  const KVT *kbase = static_cast<const KVT *>(p.k);
  const KVT *vbase = static_cast<const KVT *>(p.v);
  const int bs = p.block_size;
  const int bs_shift = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;  // power-of-two block size

  ScoreCtx sc = score_ctx_of(p);  // per-item fields (causal, kend) set below

  // Items of a plan built for the Hopper kernel have up to kAttnMaxItemRows
  // rows; where BM is smaller (head size 256) an item runs as consecutive
  // ranges of BM rows (a merging split item has at most 16 rows: one range).
  constexpr int kRanges = BM >= kAttnMaxItemRows ? 1 : kAttnMaxItemRows / BM;
  for (int item_idx = blockIdx.x; item_idx < n_items; item_idx += gridDim.x)
  for (int rg = 0; rg < kRanges; ++rg) {
    const ItemCtx ic = item_begin<kRanges == 1 ? 0 : BM>(p, item_idx, BN, &sc, rg * BM);
    if (kRanges > 1 && ic.it.num_rows <= 0) break;
    const AttnItem &it = ic.it;
    const AttnReq &rq = ic.rq;
    const int32_t *bt_row = ic.bt_row;
    const int qpos0 = ic.ik.qpos0, kstart = ic.ik.kstart, kend = ic.ik.kend, ntiles = ic.ik.ntiles;

    // Offsets of key idx of tile t into its sOff slot; keys past the range
    // get a valid key's offsets (kstart < kend when a tile exists) and are
    // zero-filled by the loader.
    auto fill_offsets = [&](int t, int idx) {
      const int j0 = kstart + t * BN + idx;
      sOff[(t % S::kStages) * BN + idx] = key_offsets(p, rq.kv_start, bt_row, bs_shift, j0 < kend ? j0 : kstart);
    };
    const KVT *kh = kbase + static_cast<int64_t>(kvh) * p.k_stride_head;
    const KVT *vh = vbase + static_cast<int64_t>(kvh) * p.v_stride_head;

    // Tile t of the item -> shared stage t % kStages (its offsets must be
    // in sOff).  16-bit caches: 16-byte cp.async (committed by the caller);
    // fp8: 16-byte loads decoded exactly to T and stored.  Keys past kend
    // are zero-filled so no garbage reaches the P V product.
    auto load_kv = [&](int t) {
      const int k0 = kstart + t * BN;
      T *sK = sKV + (t % S::kStages) * KV_STAGE;
      T *sV = sK + BN * SROW;
      const longlong2 *to = sOff + (t % S::kStages) * BN;
      constexpr int CH = CACHE == kCacheAuto ? HS / 8 : HS / 16;  // 16-byte chunks per key row
      constexpr int EPC = CACHE == kCacheAuto ? 8 : 16;           // cache elements per chunk
      if constexpr (CACHE == kCacheAuto && S::kThreads % CH == 0 && (BN * CH) % S::kThreads == 0) {
        // Each thread keeps one 16-byte column ch = tid % CH of rows
        // tid / CH + i * RP: fixed source column and shared-memory step.
        constexpr int RP = S::kThreads / CH;  // rows per pass
        const int ch = tid % CH, r0 = tid / CH;
        const KVT *kc = kh + ch * EPC, *vc = vh + ch * EPC;
        T *dk = sK + r0 * SROW + ch * 8, *dv = sV + r0 * SROW + ch * 8;
#pragma unroll
        for (int i = 0; i < BN / RP; ++i) {
          const int kr = r0 + i * RP;
          const longlong2 o = to[kr];
          const bool ok = k0 + kr < kend;
          cp_async_16(dk + i * RP * SROW, kc + o.x, ok);
          cp_async_16(dv + i * RP * SROW, vc + o.y, ok);
        }
      } else {
#pragma unroll 2
        for (int c = tid; c < BN * CH; c += S::kThreads) {
          const int kr = c / CH, ch = c - kr * CH;
          const bool ok = k0 + kr < kend;
          const longlong2 o = to[kr];
          const KVT *ks = kh + o.x + ch * EPC;
          const KVT *vs = vh + o.y + ch * EPC;
          if constexpr (CACHE == kCacheAuto) {
            cp_async_16(sK + kr * SROW + ch * 8, ks, ok);
            cp_async_16(sV + kr * SROW + ch * 8, vs, ok);
          } else {
            uint4 kraw = make_uint4(0, 0, 0, 0), vraw = make_uint4(0, 0, 0, 0);
            if (ok) {
              kraw = *reinterpret_cast<const uint4 *>(ks);
              vraw = *reinterpret_cast<const uint4 *>(vs);
            }
            const uint32_t *kb = reinterpret_cast<const uint32_t *>(&kraw);
            const uint32_t *vb = reinterpret_cast<const uint32_t *>(&vraw);
            uint32_t kw[8], vw[8];
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // word e: bytes 4e .. 4e + 3 -> elements 2e and 2e + 1 of T x 2
              fp8x4_to_h2<CACHE>(kb[e], kw[2 * e], kw[2 * e + 1]);
              fp8x4_to_h2<CACHE>(vb[e], vw[2 * e], vw[2 * e + 1]);
#pragma unroll
              for (int j = 0; j < 2; ++j) {
                kw[2 * e + j] = h2_bits_as<T>(kw[2 * e + j]);
                vw[2 * e + j] = h2_bits_as<T>(vw[2 * e + j]);
              }
            }
            uint4 *kd = reinterpret_cast<uint4 *>(sK + kr * SROW + ch * 16);
            uint4 *vd = reinterpret_cast<uint4 *>(sV + kr * SROW + ch * 16);
            kd[0] = make_uint4(kw[0], kw[1], kw[2], kw[3]);
            kd[1] = make_uint4(kw[4], kw[5], kw[6], kw[7]);
            vd[0] = make_uint4(vw[0], vw[1], vw[2], vw[3]);
            vd[1] = make_uint4(vw[4], vw[5], vw[6], vw[7]);
          }
        }
      }
    };

    __syncthreads();  // the previous item is done with shared memory
    // ---- Q tile (cp.async, in the first group): rows past num_rows are
    // zero (their scores are masked).
    for (int c = tid; c < BM * (HS / 8); c += S::kThreads) {
      const int row = c / (HS / 8), ch = c - row * (HS / 8);
      const bool ok = row < it.num_rows;
      cp_async_16(sQ + row * SROW + ch * 8, ok ? q_row_chunk<T>(p, it, rq, kvh, row, ch) : p.q, ok);
    }
    // Prefetch distance D = kStages - 1: group g holds tile g (group 0 also
    // Q); groups are committed even when empty so the counting stays uniform.
    constexpr int D = S::kStages - 1;
    for (int e = tid; e < (D + 1) * BN; e += S::kThreads)
      if (e / BN < ntiles) fill_offsets(e / BN, e % BN);
    __syncthreads();  // offsets of tiles 0 .. D visible
#pragma unroll
    for (int g = 0; g < D; ++g) {
      if (g < ntiles) load_kv(g);
      cp_async_commit();
    }

    // ---- this thread's rows: m-tile mt, rows gq and gq + 8 of the warp's
    RowCtx rc[MT];
    int head[MT][2];
    const int wrow0 = warp * 16 * MT;  // the warp's first row
    const RowMap rm = row_map_of(p, it, rq, kvh);  // rows -> tokens and heads
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) rc[mt] = row_ctx_of(p, it, rm, qpos0, wrow0 + mt * 16, gq, head[mt]);
    // The warp's query positions (for tile skipping and the unmasked path).
    const bool warp_active = wrow0 < it.num_rows;
    const bool warp_full = wrow0 + 16 * MT <= it.num_rows;
    const int wlast = (warp_full ? wrow0 + 16 * MT : it.num_rows) - 1;
    const int wqmin = qpos0 + rm.token(wrow0);
    const int wqmax = qpos0 + rm.token(warp_active ? wlast : wrow0);

    float o[MT][DF][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int f = 0; f < DF; ++f) o[mt][f][0] = o[mt][f][1] = o[mt][f][2] = o[mt][f][3] = 0.f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

    for (int t = 0; t < ntiles; ++t) {
      const int k0 = kstart + t * BN;
      // Groups committed so far: 0 .. t + D - 1; all but the newest D - 1
      // done = tile t has landed.
      cp_async_wait_group<D - 1>();
      __syncthreads();  // tile t (and Q) visible; every warp is done with tile t - 1
      if (t + D < ntiles) load_kv(t + D);  // into tile t - 1's buffer
      cp_async_commit();
      // Offsets of tile t + D + 1 into the slot tile t's load used (read
      // before this barrier); visible to its load after the next barrier.
      if (t + D + 1 < ntiles)
        for (int e = tid; e < BN; e += S::kThreads) fill_offsets(t + D + 1, e);
      const int klast = k0 + BN - 1;
      // Skip tiles that no row of this warp can see (past the causal /
      // right-window edge, or before the left window); the online-softmax
      // state is unchanged by an all-masked tile.
      bool skip = !warp_active;
      if (sc.causal) skip = skip || k0 > wqmax;
      if (p.window_right >= 0) skip = skip || k0 - wqmax > p.window_right;
      if (p.window_left >= 0) skip = skip || wqmin - klast > p.window_left;
      if (!skip) {
        const T *sK = sKV + (t % S::kStages) * KV_STAGE;
        const T *sV = sK + BN * SROW;
        // ---- S = Q K^T  (16 * MT rows x BN keys per warp)
        float s[MT][NF][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int f = 0; f < NF; ++f) s[mt][f][0] = s[mt][f][1] = s[mt][f][2] = s[mt][f][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < HS / 16; ++kk) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
            ldmatrix_x4(a[mt], sQ + (wrow0 + mt * 16 + (lane & 15)) * SROW + kk * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int f2 = 0; f2 < NF / 2; ++f2) {
            uint32_t b[4];
            ldmatrix_x4(b, sK + (f2 * 16 + (lane & 7) + 8 * (lane >> 4)) * SROW + kk * 16 +
                               8 * ((lane >> 3) & 1));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_16816<T>(s[mt][2 * f2], a[mt], b[0], b[1]);
              mma_16816<T>(s[mt][2 * f2 + 1], a[mt], b[2], b[3]);
            }
          }
        }
        // ---- masks + online softmax; the unmasked path when every pair
        // (row of the warp, key of the tile) is visible.
        bool full = warp_full && klast < kend;
        if (sc.causal) full = full && klast <= wqmin;
        if (p.window_left >= 0) full = full && wqmax - k0 <= p.window_left;
        if (p.window_right >= 0) full = full && klast - wqmin <= p.window_right;
        float pre = 1.f;  // scale still to apply (folded into the exp2; uniform)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) pre = scores_to_logits(s[mt], sc, rc[mt], k0, tq);
        if (!full) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) apply_masks(s[mt], sc, rc[mt], k0, tq);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) online_softmax(s[mt], o[mt], m[mt], l[mt], pre);
        // ---- O += P V (P re-packed from the S accumulators)
#pragma unroll
        for (int k2 = 0; k2 < BN / 16; ++k2) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            a[mt][0] = Elem<T>::pack2(s[mt][2 * k2][0], s[mt][2 * k2][1]);
            a[mt][1] = Elem<T>::pack2(s[mt][2 * k2][2], s[mt][2 * k2][3]);
            a[mt][2] = Elem<T>::pack2(s[mt][2 * k2 + 1][0], s[mt][2 * k2 + 1][1]);
            a[mt][3] = Elem<T>::pack2(s[mt][2 * k2 + 1][2], s[mt][2 * k2 + 1][3]);
          }
#pragma unroll
          for (int d2 = 0; d2 < HS / 16; ++d2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, sV + (k2 * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)) * SROW +
                                     d2 * 16 + 8 * (lane >> 4));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_16816<T>(o[mt][2 * d2], a[mt], b[0], b[1]);
              mma_16816<T>(o[mt][2 * d2 + 1], a[mt], b[2], b[3]);
            }
          }
        }
      }
    }
    cp_async_wait_group<0>();  // drain (the Q group when the item has no tile)

    // ---- epilogue
    if (warp_active) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        store_rows<T, DF>(p, it, rq, kvh, wrow0 + mt * 16, gq, tq, o[mt], m[mt], l[mt], rc[mt], head[mt]);
    }
    if (it.merge != 0) merge_split_tile<T, HS>(p, it, rq, kvh, reinterpret_cast<float *>(smem_u4));
  }
}

// Merge pass: one CTA of 4 warps per (token, head) unit; the LSE maximum
// and sum are computed lane-parallel over the parts, then warp w accumulates
// the parts i = w, w + 4, ... (lane: 4 consecutive dims, float4 loads, the
// part weights broadcast by shuffles) and the 4 warps' sums are added in
// shared memory.  head_size <= 256 and a multiple of 4.
template <class T>
__global__ void __launch_bounds__(128) plan_merge_kernel(const PlanMergeParams p) {
  __shared__ float4 red[4][64];  // [warp][head_size / 4]
  const int64_t total = static_cast<int64_t>(*p.num_tokens) * p.num_heads;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int HS = p.head_size, D4 = HS / 4;
  for (int64_t u = blockIdx.x; u < total; u += gridDim.x) {
    const int64_t t = u / p.num_heads;
    const int h = static_cast<int>(u - t * p.num_heads);
    const int2 tp = p.tok_parts[t];
    if (tp.y == 0) continue;  // written by the attention kernel (uniform in the CTA)
    T *out = static_cast<T *>(p.out) + t * p.o_stride_tok + static_cast<int64_t>(h) * p.o_stride_head;
    if (tp.y < 0) {  // padding row
      for (int d = threadIdx.x; d < HS; d += blockDim.x) out[d] = Elem<T>::from_f(0.f);
      if (p.lse && threadIdx.x == 0) p.lse[h * p.lse_stride_head + t * p.lse_stride_tok] = -INFINITY;
      continue;
    }
    const int kvh = h / p.group, g = h - kvh * p.group;
    auto row_of = [&](int i) {
      return (static_cast<int64_t>(p.part_list[tp.x + i]) + g) * p.num_kv_heads + kvh;
    };
    float mx = -INFINITY;
    for (int i = lane; i < tp.y; i += 32) mx = fmaxf(mx, p.ws_lse[row_of(i)]);
    mx = warp_max(mx);
    float sum = 0.f;
    if (mx != -INFINITY)
      for (int i = lane; i < tp.y; i += 32) sum += expf(p.ws_lse[row_of(i)] - mx);
    sum = warp_sum(sum);
    float lse, fin;  // fin: the merged output's factor (sink rescale; 0 without keys)
    merged_lse(mx, sum, p.sinks, h, &lse, &fin);
    float4 acc[2];
    acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (mx != -INFINITY) {
      const float inv = 1.f / sum;
      for (int i0 = 0; i0 < tp.y; i0 += 32) {
        // lane k holds part i0 + k's row and weight; warp w uses parts = w mod 4.
        const int i = i0 + lane;
        int64_t wr = 0;
        float wt = 0.f;
        if (i < tp.y) {
          wr = row_of(i);
          wt = expf(p.ws_lse[wr] - mx) * inv;
        }
        const int cnt = tp.y - i0 < 32 ? tp.y - i0 : 32;
#pragma unroll 4
        for (int j = warp; j < cnt; j += 4) {
          const float wj = __shfl_sync(0xffffffffu, wt, j);
          const int64_t rj = __shfl_sync(0xffffffffu, wr, j);
          const float4 *src = reinterpret_cast<const float4 *>(p.ws_o + rj * HS);
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int d4 = lane + 32 * c;
            if (d4 < D4) {
              const float4 v = src[d4];
              acc[c].x += wj * v.x;
              acc[c].y += wj * v.y;
              acc[c].z += wj * v.z;
              acc[c].w += wj * v.w;
            }
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < 2; ++c)
      if (lane + 32 * c < D4) red[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    for (int d4 = threadIdx.x; d4 < D4; d4 += blockDim.x) {
      float4 r = red[0][d4];
#pragma unroll
      for (int w = 1; w < 4; ++w) {
        const float4 v = red[w][d4];
        r.x += v.x;
        r.y += v.y;
        r.z += v.z;
        r.w += v.w;
      }
      T *o4 = out + 4 * d4;
      o4[0] = Elem<T>::from_f(r.x * fin);
      o4[1] = Elem<T>::from_f(r.y * fin);
      o4[2] = Elem<T>::from_f(r.z * fin);
      o4[3] = Elem<T>::from_f(r.w * fin);
    }
    if (p.lse && threadIdx.x == 0) p.lse[h * p.lse_stride_head + t * p.lse_stride_tok] = lse;
    __syncthreads();  // red is reused by the next unit
  }
}

}  // namespace kern
}  // namespace vattn
