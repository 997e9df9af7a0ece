// attention_item.cuh -- the per-item bookkeeping shared by attention_kernel
// (attention.cuh, mma.sync, sm_80+) and attention_sm90_kernel
// (attention_sm90.cuh, wgmma, sm_90a): an item's key range, the per-key
// cache offsets, this thread's row contexts and the epilogue that writes a
// 16-row m-tile (to the output, or to the workspace for split tiles).  The
// kernels differ only in how tiles move through shared memory and which
// tensor-core instructions multiply them.
#pragma once

#include <type_traits>

#include "common.cuh"
#include "softmax.cuh"

namespace vattn {
namespace kern {

// Adds a sink logit to a row's softmax denominator: *lse becomes
// log(exp(lse) + exp(sink)) and *f (the output factor) is multiplied by
// exp(old lse - new lse).  -inf sink: no-op; +inf sink takes all the mass
// (output 0, LSE +inf), as the CPU backend does.
__device__ __forceinline__ void apply_sink(float sink, float *lse, float *f) {
  if (sink == -INFINITY) return;
  if (sink == INFINITY) {
    *f = 0.f;
    *lse = INFINITY;
    return;
  }
  const float l0 = *lse;
  const float mm = fmaxf(l0, sink);
  const float l1 = mm + logf(expf(l0 - mm) + expf(sink - mm));
  *f *= l0 == -INFINITY ? 0.f : expf(l0 - l1);
  *lse = l1;
}

// Merging partial states (the split merges: merge_split_tile below and
// plan_merge_kernel).  warp_max / warp_sum reduce over the whole warp (every
// lane gets the result).  merged_lse: the LSE of the merged row from the
// parts' maximum mx and sum of exp(lse_i - mx), with the head's sink (sinks
// may be null) applied, and the factor of the merged output (0 when no part
// saw a key).
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ void merged_lse(float mx, float sum, const float *sinks, int h, float *lse,
                                           float *f) {
  *lse = mx == -INFINITY ? -INFINITY : mx + logf(sum);
  *f = 1.f;
  if (sinks) apply_sink(sinks[h], lse, f);
  if (mx == -INFINITY) *f = 0.f;
}

// Keys [kstart, kend) an item visits in tiles of BN, clipped by causality
// and the windows of its rows.  Dense K/V (encoder types): keys are the
// request's own rows, kv_len = q_len, positions start at 0; paged: bottom-
// right aligned positions (qpos0 = q_pos0).
struct ItemKeys {
  int qpos0, kstart, kend, ntiles;
  int qmin, qmax;  // positions of the item's first and last query rows
};
__device__ __forceinline__ ItemKeys item_keys(const AttnParams &p, const AttnItem &it,
                                              const AttnReq &rq, bool causal, int BN) {
  const int G = p.group;
  ItemKeys r;
  r.qpos0 = p.paged ? rq.q_pos0 : 0;
  const int kv_len = p.paged ? rq.kv_len : rq.q_len;
  const int qmin = r.qpos0 + it.q_row0 / G;
  const int qmax = r.qpos0 + (it.q_row0 + it.num_rows - 1) / G;
  int kend = it.kv_end < kv_len ? it.kv_end : kv_len;
  if (causal && kend > qmax + 1) kend = qmax + 1;
  if (p.window_right >= 0 && kend > qmax + p.window_right + 1) kend = qmax + p.window_right + 1;
  int kstart = it.kv_begin;
  if (p.window_left >= 0 && qmin - p.window_left > kstart)
    kstart += ((qmin - p.window_left - kstart) / BN) * BN;  // skip whole tiles out of the window
  r.kstart = kstart;
  r.kend = kend;
  r.qmin = qmin;
  r.qmax = qmax;
  r.ntiles = kend > kstart ? (kend - kstart + BN - 1) / BN : 0;
  return r;
}

// An item with its request, key range and block-table row; sets the
// item's fields of the score context (causal, kend).
struct ItemCtx {
  AttnItem it;
  AttnReq rq;
  ItemKeys ik;
  const int32_t *bt_row;
};
// ROWS > 0: rows [row0, row0 + ROWS) of the item only (a kernel whose BM is
// below the plan's item rows runs an item as consecutive row ranges; an
// empty range has num_rows <= 0).
template <int ROWS = 0>
__device__ __forceinline__ ItemCtx item_begin(const AttnParams &p, int item_idx, int BN, ScoreCtx *sc,
                                              int row0 = 0) {
  ItemCtx c;
  c.it = p.items[item_idx];
  if constexpr (ROWS > 0) {
    c.it.q_row0 += row0;
    c.it.num_rows = min(ROWS, c.it.num_rows - row0);
    if (c.it.ws_base >= 0) c.it.ws_base += row0;  // partial rows: ws_base + row
  }
  c.rq = p.reqs[c.it.req];
  sc->causal = c.rq.causal != 0 && p.allow_causal != 0;
  c.ik = item_keys(p, c.it, c.rq, sc->causal, BN);
  sc->kend = c.ik.kend;
  c.bt_row = p.block_table + static_cast<int64_t>(c.rq.bt_row) * p.bt_stride;
  return c;
}

// Block-table entry holding key j of a paged request (bs_shift >= 0:
// power-of-two block size).
__device__ __forceinline__ int key_block(const AttnParams &p, const int32_t *bt_row, int bs_shift, int j) {
  return bt_row[bs_shift >= 0 ? j >> bs_shift : j / p.block_size];
}

// Cache block *blk and slot *slot in it of key j of a paged request.
__device__ __forceinline__ void key_slot(const AttnParams &p, const int32_t *bt_row, int bs_shift, int j,
                                         int *blk, int *slot) {
  *blk = key_block(p, bt_row, bs_shift, j);
  *slot = bs_shift >= 0 ? j & (p.block_size - 1) : j % p.block_size;
}

// (K, V) element offsets of key j of a request, from its head's base: one
// block-table lookup when paged; kv_start: the request's first row in dense
// K / V (AttnReq::kv_start, unused when paged).
__device__ __forceinline__ longlong2 key_offsets(const AttnParams &p, int kv_start,
                                                 const int32_t *bt_row, int bs_shift, int j) {
  longlong2 o;
  if (p.paged) {
    int blk, slot;
    key_slot(p, bt_row, bs_shift, j, &blk, &slot);
    o.x = static_cast<int64_t>(blk) * p.k_stride_block + static_cast<int64_t>(slot) * p.k_stride_tok;
    o.y = static_cast<int64_t>(blk) * p.v_stride_block + static_cast<int64_t>(slot) * p.v_stride_tok;
  } else {
    const int64_t tk = static_cast<int64_t>(kv_start) + j;
    o.x = tk * p.k_stride_tok;
    o.y = tk * p.v_stride_tok;
  }
  return o;
}

// Item rows -> (query token, head) without an integer division per row:
// row `row` of an item is lr = q_row0 + row, token q_start + lr / G, head
// kvh G + lr % G.  One division per item; then x = q_row0 % G + row < G +
// 2^16 and (x + 0.5) / G in fp32 is at least 0.5 / G away from an integer
// and off by less than x / G * 2^-23, so its truncation is exact.
struct RowMap {
  int64_t tok_base;  // q_start + t0
  int t0, h_base, x0, G;  // t0 = q_row0 / G, x0 = q_row0 % G
  float inv_g;
  __device__ __forceinline__ int quot(int x) const {  // x / G, 0 <= x < G + 2^16
    return __float2int_rz((static_cast<float>(x) + 0.5f) * inv_g);
  }
  // Row `row`: its token's index in the request (lr / G) and its head.
  __device__ __forceinline__ void at(int row, int *t, int *h) const {
    const int x = x0 + row;
    const int tt = quot(x);
    *t = t0 + tt;
    *h = h_base + (x - tt * G);
  }
  __device__ __forceinline__ int token(int row) const { return t0 + quot(x0 + row); }
  __device__ __forceinline__ void of(int row, int64_t *tok, int *h) const {
    int t;
    at(row, &t, h);
    *tok = tok_base + (t - t0);
  }
};
// From t0 = q_row0 / G and x0 = q_row0 % G when they are already known
// (the Hopper kernel's unit slots), and inv_g = 1 / G.
__device__ __forceinline__ RowMap row_map_at(const AttnParams &p, const AttnReq &rq, int kvh, int t0, int x0,
                                             float inv_g) {
  RowMap m;
  m.G = p.group;
  m.t0 = t0;
  m.x0 = x0;
  m.tok_base = static_cast<int64_t>(rq.q_start) + t0;
  m.h_base = kvh * m.G;
  m.inv_g = inv_g;
  return m;
}
__device__ __forceinline__ RowMap row_map_of(const AttnParams &p, const AttnItem &it, const AttnReq &rq,
                                             int kvh) {
  const int t0 = it.q_row0 / p.group;
  return row_map_at(p, rq, kvh, t0, it.q_row0 - t0 * p.group, 1.f / static_cast<float>(p.group));
}

// Global address of 16-byte chunk ch of Q row `row` of an item (row < num_rows).
template <class T>
__device__ __forceinline__ const T *q_row_chunk(const AttnParams &p, const AttnItem &it,
                                                const AttnReq &rq, int kvh, int row, int ch) {
  const int G = p.group;
  const int lr = it.q_row0 + row;
  const int64_t tok = rq.q_start + lr / G;
  const int h = kvh * G + lr % G;
  return static_cast<const T *>(p.q) + tok * p.q_stride_tok + static_cast<int64_t>(h) * p.q_stride_head +
         ch * 8;
}

// Row context i of this thread: item row `row` (*head: its query head),
// from the item's RowMap for its KV head (no integer division).
__device__ __forceinline__ void row_ctx_set(const AttnParams &p, const AttnItem &it, const RowMap &rm,
                                            int qpos0, int row, int i, RowCtx *rc, int *head) {
  rc->valid[i] = row < it.num_rows;
  int t;
  rm.at(rc->valid[i] ? row : 0, &t, head);
  rc->qpos[i] = qpos0 + t;
  rc->slope[i] = p.alibi ? p.alibi[*head] : 0.f;
}
// Row contexts of this thread's rows row0 + gq and row0 + gq + 8 of an item
// (heads written to head[2]).
__device__ __forceinline__ RowCtx row_ctx_of(const AttnParams &p, const AttnItem &it, const RowMap &rm,
                                             int qpos0, int row0, int gq, int (&head)[2]) {
  RowCtx rc;
#pragma unroll
  for (int i = 0; i < 2; ++i) row_ctx_set(p, it, rm, qpos0, row0 + gq + 8 * i, i, &rc, &head[i]);
  return rc;
}

// A row's final statistics from its reference m (base 2) and its whole sum
// l of 2^(x - m): *lse (natural log) and the output factor *f (v_scale /
// sum), with head h's sink applied when the item writes final rows.  The
// LSE is left -inf when nothing reads it: a final row with no LSE output
// and no sink.  The hardware log2 and reciprocal (MUFU.LG2 / MUFU.RCP,
// about 2^-22 relative error; l >= 1 whenever l > 0, since the row's
// maximum contributes 2^0) without branches: log2f and the IEEE division
// took about 60 instructions and a slow-path branch per row, in the
// Hopper kernel's unit epilogue, where every consumer warp runs them at
// once (see attention_sm90.cuh).
__device__ __forceinline__ void final_stats(const AttnParams &p, const AttnItem &it, float m, float l,
                                            int h, float *lse, float *f) {
  const bool pos = l > 0.f;
  const bool need = it.ws_base >= 0 || p.lse != nullptr || p.sinks != nullptr;
  *lse = pos && need ? (m + __log2f(l)) * kLn2 : -INFINITY;
  *f = pos ? __fdividef(p.v_scale, l) : 0.f;
  if (it.ws_base < 0 && p.sinks) apply_sink(p.sinks[h], lse, f);
}

// The final LSE of head h at token tok, where the caller asked for it.
__device__ __forceinline__ void store_lse(const AttnParams &p, int h, int64_t tok, float lse) {
  if (p.lse) p.lse[h * p.lse_stride_head + tok * p.lse_stride_tok] = lse;
}

// final_stats of a row from this thread's partial sum l (reduced over the
// quad here; every lane of the warp must call).
__device__ __forceinline__ void row_final(const AttnParams &p, const AttnItem &it, float m, float l,
                                          int h, float *lse, float *f) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  final_stats(p, it, m, l, h, lse, f);
}

// Epilogue of one 16-row m-tile starting at item row row0: normalises the
// accumulators o (mma fragment layout, DF = HS / 8) by the quad-reduced row
// sums l, then writes the output rows and LSE (sinks applied), or, for a
// split item (ws_base >= 0), the fp32 partial and its LSE to the workspace.
template <class T, int DF>
__device__ __forceinline__ void store_rows(const AttnParams &p, const AttnItem &it, const AttnReq &rq,
                                           int kvh, int row0, int gq, int tq, const float (&o)[DF][4],
                                           const float (&m)[2], const float (&l)[2], const RowCtx &rc,
                                           const int (&head)[2]) {
  constexpr int HS = DF * 8;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float lse, f;
    row_final(p, it, m[i], l[i], head[i], &lse, &f);
    if (!rc.valid[i]) continue;
    const int row = row0 + gq + 8 * i;
    const int lr = it.q_row0 + row;
    const int h = head[i];
    if (it.ws_base < 0) {
      const int64_t tok = rq.q_start + lr / p.group;
      T *out = static_cast<T *>(p.out) + tok * p.o_stride_tok + static_cast<int64_t>(h) * p.o_stride_head;
#pragma unroll
      for (int df = 0; df < DF; ++df) {
        const uint32_t w = Elem<T>::pack2(o[df][2 * i] * f, o[df][2 * i + 1] * f);
        *reinterpret_cast<uint32_t *>(out + df * 8 + 2 * tq) = w;
      }
      if (tq == 0) store_lse(p, h, tok, lse);
    } else {
      const int64_t wr = (static_cast<int64_t>(it.ws_base) + row) * p.num_kv_heads + kvh;
      float *wo = p.ws_o + wr * HS;
#pragma unroll
      for (int df = 0; df < DF; ++df)
        *reinterpret_cast<float2 *>(wo + df * 8 + 2 * tq) =
            make_float2(o[df][2 * i] * f, o[df][2 * i + 1] * f);
      if (tq == 0) p.ws_lse[wr] = lse;
    }
  }
}

// Split tiles can merge themselves (AttnItem::merge): every split item
// writes its fp32 partial (normalised output + LSE) to the workspace as
// usual, then counts its arrival on an arrival counter; the CTA that arrives
// last combines the partials (weights exp(lse_j - max) / sum) and resets the
// counter for the next launch (graph replays included).  A flat tile (its
// group covers it) has one counter, and its last CTA merges every partial
// into the output rows (sinks applied as in plan_merge_kernel).  A tile in
// groups (launch.h) counts on its group's counter first: the group's last
// CTA merges the group into the workspace rows of the group's first part
// (their LSE without sinks), then counts on the tile's counter, whose last
// arrival merges the groups' results into the output.  Partials of other
// CTAs are read through L2 (__ldcg: L1 is not coherent).  `scratch` is the
// CTA's shared body (free once the epilogue is done): weights
// [16][kMaxSelfMergeParts] + row stats (kMergeScratchFloats).  Run by
// threads [0, nthreads) of the CTA (whole warps), which sync() makes wait
// for each other (__syncthreads, or a named barrier over those threads).

// One acquire-release atomic by thread 0 after the barrier publishes the
// whole CTA's writes (the barrier orders the other threads' writes before
// it; release is cumulative) and, for the last CTA, orders its reads of the
// others' after the count (the next barrier passes that on).  It replaced a
// fence in every thread before and after a relaxed atomicAdd: H100 decode
// 1x32768 55.2-55.6 -> 54.8-55.2 us (same-run A/B).  True in every thread
// of the CTA that arrives n-th.
template <class Sync>
__device__ __forceinline__ bool merge_arrive_last(int *ctr, int n, int *s_last, Sync sync) {
  sync();
  if (threadIdx.x == 0) {
    int prev;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n" : "=r"(prev) : "l"(ctr) : "memory");
    *s_last = prev == n - 1;
  }
  sync();
  return *s_last != 0;
}

// The weights of n partials, one warp per row: partial j of row r has its
// LSE at workspace entry (row0 + r) * num_kv_heads + kvh + j * step.
// w[r][j] = exp(lse_j - max) / sum; row_lse / row_f: to_out, the merged
// row's LSE with the sink and the output factor (merged_lse); else the
// plain merged LSE and 1.  Ends with sync().
template <class Sync>
__device__ __forceinline__ void merge_weights(const AttnParams &p, const AttnItem &it, int kvh, int64_t row0,
                                              int64_t step, int n, float *scratch, int nthreads, Sync sync,
                                              bool to_out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = nthreads >> 5;
  float *w = scratch;                                  // [16][kMaxSelfMergeParts]
  float *row_lse = scratch + 16 * kMaxSelfMergeParts;  // [16]
  float *row_f = row_lse + 16;                         // [16] output factor
  for (int r = warp; r < it.num_rows; r += nwarps) {
    float l0 = -INFINITY, l1 = -INFINITY;
    const int64_t w0 = (row0 + r) * p.num_kv_heads + kvh;
    if (lane < n) l0 = __ldcg(p.ws_lse + w0 + lane * step);
    if (lane + 32 < n) l1 = __ldcg(p.ws_lse + w0 + (lane + 32) * step);
    const float mx = warp_max(fmaxf(l0, l1));
    const float e0 = mx == -INFINITY || l0 == -INFINITY ? 0.f : expf(l0 - mx);
    const float e1 = mx == -INFINITY || l1 == -INFINITY ? 0.f : expf(l1 - mx);
    const float sum = warp_sum(e0 + e1);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    if (lane < n) w[r * kMaxSelfMergeParts + lane] = e0 * inv;
    if (lane + 32 < n) w[r * kMaxSelfMergeParts + lane + 32] = e1 * inv;
    if (lane == 0) {
      if (to_out) {
        merged_lse(mx, sum, p.sinks, kvh * p.group + (it.q_row0 + r) % p.group, &row_lse[r], &row_f[r]);
      } else {
        row_lse[r] = mx == -INFINITY ? -INFINITY : mx + logf(sum);
        row_f[r] = 1.f;
      }
    }
  }
  sync();
}

// acc += wt * v (one partial's weighted dims).
__device__ __forceinline__ void merge_acc(float4 &acc, float wt, float4 v) {
  acc.x += wt * v.x;
  acc.y += wt * v.y;
  acc.z += wt * v.z;
  acc.w += wt * v.w;
}

// Writes the merged dims d .. d + 3 of row r: to_out, to the output (and
// the LSE output), else over partial 0's own workspace entry (the group's
// result; the thread that writes these dims alone read them, and every LSE
// read ended at merge_weights' barrier).
template <class T, int HS>
__device__ __forceinline__ void merge_store(const AttnParams &p, const AttnItem &it, const AttnReq &rq, int kvh,
                                            int64_t row0, int r, int d, float4 acc, const float *scratch,
                                            bool to_out) {
  const float *row_lse = scratch + 16 * kMaxSelfMergeParts;
  const float f = row_lse[16 + r];
  if (to_out) {
    const int lr = it.q_row0 + r;
    const int h = kvh * p.group + lr % p.group;
    const int64_t tok = rq.q_start + lr / p.group;
    T *out = static_cast<T *>(p.out) + tok * p.o_stride_tok + static_cast<int64_t>(h) * p.o_stride_head + d;
    *reinterpret_cast<uint2 *>(out) =
        make_uint2(Elem<T>::pack2(acc.x * f, acc.y * f), Elem<T>::pack2(acc.z * f, acc.w * f));
    if (d == 0) store_lse(p, h, tok, row_lse[r]);
  } else {
    const int64_t wr = (row0 + r) * p.num_kv_heads + kvh;
    *reinterpret_cast<float4 *>(p.ws_o + wr * HS + d) = acc;
    if (d == 0) p.ws_lse[wr] = row_lse[r];
  }
}

// One step of merge_split_tile: the last CTA of a tile (or group) combines
// n partials of the tile's rows, partial j of row r at workspace entry
// (row0 + r) * num_kv_heads + kvh + j * step, into the output (to_out) or
// over partial 0.  BATCH (the decode kernel): a thread's loads go out in
// batches of 16 (8 at head size 64, whose decode CTAs fit four per SM in
// 128 registers), 8, 4, then one by one, all of a batch together: left to
// itself the compiler unrolled this loop by 4 in one build and sent a
// tail of 8 parts one load at a time in another (H200, 1 KV head 1x8192,
// 64 parts: up to 5 us slower).  A merge costs dependent L2 round
// trips, not bandwidth: H200 clock64 stamps of a flat merge of 64 partials
// of 8 rows, 12.0 us kernel: atomic 0.7 us, LSE step 1.6 us (two rows per
// warp), loads 3.9 us (eight batches per thread).  Else the compiler's own
// loop (the attention kernels: a decode item runs there only where no
// decode kernel serves the layer, and the Hopper prefill kernel has no
// registers to spare).
template <class T, int HS, bool BATCH, class Sync>
__device__ __forceinline__ void merge_tree_step(const AttnParams &p, const AttnItem &it, const AttnReq &rq, int kvh,
                                                int64_t row0, int64_t step, int n, float *scratch, int nthreads,
                                                Sync sync, bool to_out) {
  const int tid = threadIdx.x, rows = it.num_rows, nkv = p.num_kv_heads;
  constexpr int D4 = HS / 4;
  // BATCH: a thread loads the first PRE partials of its first output chunk
  // before the weights are known, so those loads overlap the LSE step (one
  // L2 round trip less on the critical path of the last CTA).  8 rather
  // than the 16 of session 8 (chosen on the H100 against none): H200,
  // same-run A/B in three calls, eager us, 3 rounds each, 16 -> 8 (call 3):
  // 1x32768 40.94-41.09 -> 40.50-40.56, 8x8192 71.38-71.63 -> 70.91-70.98,
  // fp8 8x8192 43.02-43.07 -> 42.40-42.58, fp8 4x8192 26.64-26.83 ->
  // 26.16-26.18, D256 4x8192 72.18-72.59 -> 71.52-71.68; 4 was between the
  // two; 4 at head size 64, where more registers would cost a resident CTA.
  constexpr int PRE = !BATCH ? 0 : HS <= 64 ? 4 : 8;
  auto part_o = [&](int r, int d, int j) {  // part j of row r, dims d .. d + 3
    return __ldcg(reinterpret_cast<const float4 *>(p.ws_o + ((row0 + r) * nkv + kvh + j * step) * HS + d));
  };
  float4 pre[PRE > 0 ? PRE : 1];
  if constexpr (PRE > 0) {
    if (tid < rows * D4) {
      const int r = tid / D4, d = 4 * (tid - r * D4);
#pragma unroll
      for (int j = 0; j < PRE; ++j)
        if (j < n) pre[j] = part_o(r, d, j);
    }
  }
  merge_weights(p, it, kvh, row0, step, n, scratch, nthreads, sync, to_out);
  const float *w = scratch;
  for (int e = tid; e < rows * D4; e += nthreads) {
    const int r = e / D4, d = 4 * (e - r * D4);
    const float *wr = w + r * kMaxSelfMergeParts;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    int j = 0;
    if constexpr (PRE > 0) {
      if (e == tid) {  // the first chunk: its first PRE partials are in pre
#pragma unroll
        for (int u = 0; u < PRE; ++u)
          if (u < n) merge_acc(acc, wr[u], pre[u]);
        j = PRE;
      }
    }
    if constexpr (BATCH) {
      auto batch = [&](auto u_const) {
        constexpr int U = decltype(u_const)::value;
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = part_o(r, d, j + u);
#pragma unroll
        for (int u = 0; u < U; ++u) merge_acc(acc, wr[j + u], v[u]);
        j += U;
      };
      if constexpr (HS >= 128) {
#pragma unroll 1
        while (j + 16 <= n) batch(std::integral_constant<int, 16>());
        if (j + 8 <= n) batch(std::integral_constant<int, 8>());
      } else {
#pragma unroll 1
        while (j + 8 <= n) batch(std::integral_constant<int, 8>());
      }
      if (j + 4 <= n) batch(std::integral_constant<int, 4>());
#pragma unroll 1
      while (j < n) batch(std::integral_constant<int, 1>());
    } else {
      for (; j < n; ++j) merge_acc(acc, wr[j], part_o(r, d, j));
    }
    merge_store<T, HS>(p, it, rq, kvh, row0, r, d, acc, scratch, to_out);
  }
}

// The merge of a split tile: flat where the item's group covers the tile,
// else the item's group first, then the groups' results (parts 0, group,
// 2 group, ...).  Each merging CTA resets the counter it won.  BATCH: see
// merge_tree_step (the decode kernel; the attention kernels keep the
// compiler's loop).
// sync_at_end: the merging CTA syncs once more after its last read of the
// scratch, for callers whose threads may write it again without passing
// another barrier over all of them (the Hopper kernel's staging rows).
template <class T, int HS, bool BATCH = false, class Sync>
__device__ __forceinline__ void merge_split_tile(const AttnParams &p, const AttnItem &it, const AttnReq &rq, int kvh,
                                                 float *scratch, int nthreads, Sync sync, bool sync_at_end = false) {
  __shared__ int s_last;
  const int tid = threadIdx.x;
  const int parts = self_merge_parts(it.merge), idx = self_merge_index(it.merge);
  const int group = self_merge_group(it.merge);
  const int rows = it.num_rows, nkv = p.num_kv_heads;
  const int64_t base = static_cast<int64_t>(it.ws_base) - static_cast<int64_t>(idx) * rows;
  const int64_t step = static_cast<int64_t>(rows) * nkv;  // between one row's parts
  int *const tile_ctr = p.merge_counters + static_cast<int64_t>(it.merge_slot) * nkv + kvh;
  // This step's partials (the item's group, or the whole tile when flat),
  // then the groups' results (parts 0, group, 2 group, ...): one call site,
  // so the step's code is inlined once.
  const bool grouped = group < parts;
  const int g = grouped ? idx / group : 0;
  int *ctr = grouped ? tile_ctr + static_cast<int64_t>(1 + g) * nkv : tile_ctr;
  int64_t row0 = base + static_cast<int64_t>(g) * group * rows, st = step;
  int n = grouped ? min(group, parts - g * group) : parts;
  bool to_out = !grouped;
  if (!merge_arrive_last(ctr, n, &s_last, sync)) return;
  for (;;) {
    merge_tree_step<T, HS, BATCH>(p, it, rq, kvh, row0, st, n, scratch, nthreads, sync, to_out);
    if (tid == 0) *ctr = 0;
    if (to_out) break;
    // (merge_arrive_last's first barrier also keeps the scratch until every
    // thread is done with the group step.)
    ctr = tile_ctr;
    row0 = base;
    st = step * group;
    n = (parts + group - 1) / group;
    to_out = true;
    if (!merge_arrive_last(ctr, n, &s_last, sync)) return;
  }
  if (sync_at_end) sync();
}

// merge_split_tile over the whole CTA.
template <class T, int HS>
__device__ __forceinline__ void merge_split_tile(const AttnParams &p, const AttnItem &it,
                                              const AttnReq &rq, int kvh, float *scratch) {
  merge_split_tile<T, HS>(p, it, rq, kvh, scratch, static_cast<int>(blockDim.x), [] { __syncthreads(); });
}

}  // namespace kern
}  // namespace vattn
