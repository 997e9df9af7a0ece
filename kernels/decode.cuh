// decode.cuh -- the decode-specialised paged attention kernel: work items of
// at most 16 query rows (a decode token's G query heads, or a few tokens of a
// short speculative request) against a key range of the paged cache.
//
// Work decomposition: grid = (num_kv_heads / NH, n), n = launch_decode's
// grid_x; CTA (x, y) runs KV heads NH x .. NH x + NH - 1 and walks the
// plan's items [*first_item + y, *num_items) with stride n (counts on the
// device, see launch.h).  The heads vary fastest in launch order, so the
// CTAs of one item's KV heads start together and read each cache block's
// NHD rows at about the same time.  H100, same-run A/B against items
// fastest: bf16 256x512 194.0 -> 191.2 us, 128x1024 193.4 -> 191.8,
// 1x32768 and 8x8192 unchanged; fp8 1x32768 35.9-36.1 -> 35.0-35.3,
// 8x8192 58.7-59.6 -> 57.6, 32x4096 105.7-106.0 -> 103.1-103.5.
// NH = 2 at head size 64 when the plan was built for an fp8 cache
// (decode_kv_heads_per_cta): a staged key row is then the two heads' 64-byte
// rows, one 128-byte span of the NHD layout (a 16-bit cache run with such a
// plan stages 2 x 128 bytes).  The CTA's 4 warps share the 16 query rows
// (Q in shared memory; NH = 2: 8 rows per head) and split the item's keys:
// warp w takes the 16-key tiles w, w + 4, w + 8, ... (a tile never crosses a
// cache block: block_size is a multiple of 16 and item key ranges start at
// multiples of 16).
// Each warp streams its tiles through its own NST-stage pipeline (no CTA
// barrier in the loop; 16-byte cp.async copies, or TMA boxes in the TMA
// instance below), computes S = Q K^T and O += P V with mma.m16n8k16 and
// keeps its own online-softmax state; the block ids of its next 32 tiles
// sit one per lane in a register.  At the end the four partial states are
// merged through shared memory and the item's rows are written (final
// output, or fp32 partials + LSE for the plan's merge pass), exactly as
// attention_kernel writes them.
//
// The TMA instance (launch: compute capability 9.0, one KV head per CTA,
// key rows of >= 128 bytes, tensor maps that encode; sm90_kv_maps): lane 0
// of a warp asks for a tile's K and V as boxes of [16 rows][128 bytes]
// (128-byte swizzle), all 16 rows of the cache block, on the stage's
// mbarrier; rows past the item's keys are masked in S and zeroed in V when
// they land.  Fewer instructions per tile than 16 cp.async per lane, and
// faster: H100, same-run A/B against cp.async, eager us, 2 rounds: bf16
// 32x4096 187.7-188.1 -> 184.2-184.3, 128x1024 190.7 -> 187.3-187.5, D64
// 32x4096 100.7-100.8 -> 96.0-96.2, D256 372.3-372.5 -> 364.7-365.3; fp8
// 8x8192 57.5-57.6 -> 55.1-55.2, 32x4096 103.1-103.7 -> 97.8-97.9, D256
// 32x4096 226.6-228.3 -> 201.8-203.4; bf16 1x32768 54.6-54.9 -> 54.8-55.0.
//
// fp8 caches: the raw bytes are staged (cp.async or TMA) and decoded
// exactly to fp16 in registers while the mma operands are loaded (no 16-bit
// copy in shared memory): e5m2 is the high byte of an fp16 (one byte permute per
// pair), e4m3 uses the packed fp8x2 -> f16x2 conversion (one instruction on
// sm_89+; before, e4m3x2_to_h2_soft in common.cuh: cuda_fp8.h's emulated
// conversion made fp8 decode 5.7-8.4x slower and spilled 916 bytes at head
// size 256, measured as compute_80 code on the H100).  Both products use
// fp16 mma (Q is converted to fp16 once per item, exact for |q| in
// [2^-14, 65504]; P in fp16 is at least as precise as in bf16), with two
// index permutations that let each lane read whole 32-bit
// words of the cache: S = Q K^T runs over head dims in the order that puts
// dims 4t..4t+3 of a 16-dim chunk in lane t's fragment (Q is read the same
// way), and O += P V gives n-tile (c, j) of a 32-dim chunk the dims
// 32c + 4g + j (g = lane / 4), undone when the output is written.  k_scale
// multiplies the score and v_scale the output.  Masks, soft-cap, ALiBi and
// sinks as in attention.cuh.
#pragma once

#include <type_traits>

#include "attention.cuh"
#include "attention_sm90.cuh"  // Sm90KvMaps, the TMA and mbarrier helpers

namespace vattn {
namespace kern {

// NH: KV heads per CTA (decode_kv_heads_per_cta): a staged key row holds
// the NH adjacent heads' rows of that key, head after head.
template <int HS, int CACHE, int NH = 1, bool TMA = false>
struct DecShape {
  static constexpr int KT = 16;  // keys per warp tile
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(kWarps * KT == kDecodeRoundKeys, "the builder's split model counts rounds of kDecodeRoundKeys keys");
  static constexpr int SROW = HS + 8;        // Q: 16-bit shared row stride (elements)
  static constexpr int KSROW = NH * HS + 8;  // K / V of a 16-bit cache (elements)
  static constexpr bool kFp8 = CACHE != kCacheAuto;
  // Pipeline depth per warp.  fp8 caches and head size 64 use two stages:
  // smaller CTAs let 4-5 of them reside per SM, which hides each CTA's
  // prologue (Q, block ids, first tiles) and epilogue behind the others'
  // streaming (H200: fp8 decode 46-56% -> 54-75% of the copy ceiling,
  // 32x4096 D64 64% -> 75%); 16-bit head size 128 keeps three stages
  // (2 CTAs per SM), faster on long contexts.  Head size 256 uses two:
  // fp8 then fits two CTAs per SM instead of one with four stages (H100,
  // same-run A/Bs, 4 -> 2 stages, eager us, 2 rounds; TMA: 32x4096
  // 201.8-203.5 -> 189.4, 128x1024 227.7-227.9 -> 197.3-197.4, 1x32768
  // 60.1-60.2 -> 57.7-57.8, three stages fell between; cp.async
  // (VATTN_CUDA_SM90_TMA=0): 32x4096 226.4-226.5 -> 195.2-195.3, 128x1024
  // 256.3-256.4 -> 198.7-199.0, 1x32768 68.0-68.2 -> 65.4-65.5).  The
  // builder reads the residency from the occupancy API
  // (decode_ctas_per_sm).
  // The exception: fp8 at head size 128 on TMA (sm_90a) has three stages,
  // of which a warp keeps one or two tiles in flight ahead of the one it
  // computes (kVarAhead: two only for items that cover their rows' keys,
  // on devices that want the depth; AttnParams::dec_ahead,
  // decode_fp8_ahead says what was measured).  Three stages still fit the
  // two CTAs per SM that its registers allow.  The cp.async instance keeps
  // two (GPUs with 100 KiB of shared memory per SM would lose a resident
  // CTA).
  // 16-bit head size 128 on TMA (kAhead16): a warp keeps two of its three
  // stages in flight ahead of the one it computes, or one for items of at
  // least 4 x AttnParams::dec_one_ahead_tiles tiles in launches of more
  // working CTAs than SMs (decode_16bit_ahead says what was measured).
  static constexpr int NST = HS <= 64 ? 2 : HS <= 128 ? (kFp8 ? (TMA ? 3 : 2) : 3) : 2;
  static constexpr bool kVarAhead = kFp8 && HS == 128 && TMA;
  static constexpr bool kAhead16 = !kFp8 && HS == 128 && TMA;
  static constexpr int RAW_ROW = kFp8 ? NH * HS + 16 : KSROW * 2;  // bytes per staged key row
  // TMA: a stage is K then V, each NB boxes of 16 key rows x 128 bytes
  // (64 dims of a 16-bit cache, 128 of fp8; 128-byte swizzle, 1024-byte
  // aligned): K or V is the [NB][16][128 bytes] tile of swz_chunk<KT>.
  static constexpr int BOX = KT * 128;
  static constexpr int NB = HS * (kFp8 ? 1 : 2) / 128;
  static constexpr int STAGE = TMA ? 2 * NB * BOX : 2 * KT * RAW_ROW;  // K rows then V rows
  static constexpr int WARP_BYTES = NST * STAGE;
  static constexpr int Q_BYTES = 16 * SROW * 2;
  // Epilogue exchange: the warps' O rows at a stride of HS + 8 floats (the
  // fragment stores of a warp's 8 row groups then hit distinct banks; at
  // HS they were 8-way conflicts), then m and l.
  static constexpr int RED_ROW = HS + 8;
  static constexpr int RED_BYTES = kWarps * 16 * (RED_ROW + 2) * 4;
  static constexpr int BODY = kWarps * WARP_BYTES > RED_BYTES ? kWarps * WARP_BYTES : RED_BYTES;
  // TMA: [body][Q][mbarriers: kWarps x NST], + 1 KiB to align the body.
  static constexpr int BAR_BYTES = TMA ? kWarps * NST * 8 : 0;
  static constexpr size_t smem_bytes() { return static_cast<size_t>(Q_BYTES + BODY + (TMA ? BAR_BYTES + 1024 : 0)); }
};

// The TMA instance's primitives (wgmma.cuh, compiled for sm_90a only;
// other targets never launch that instance and see empty bodies).
// dec_bars_init: NST one-arrival barriers at bar0, bar0 + 8, ...
template <int NST>
__device__ __forceinline__ void dec_bars_init(uint32_t bar0) {
#if VATTN_SM90A
#pragma unroll
  for (int st = 0; st < NST; ++st) mbar_init(bar0 + 8 * st, 1);
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// Generic-proxy writes to shared memory before later async-proxy ones.
__device__ __forceinline__ void dec_fence_proxy() {
#if VATTN_SM90A
  fence_proxy_async_if(true);
#endif
}
__device__ __forceinline__ void dec_bar_wait(uint32_t bar, uint32_t parity) {
#if VATTN_SM90A
  mbar_wait(bar, parity);
#endif
}
// One tile of one KV head: key rows [row, row + 16) of cache block blk,
// K then V, each NB boxes of 16 rows x 128 bytes (E-byte elements) at dst;
// completes on bar.
template <int NB, int E>
__device__ __forceinline__ void dec_tma_tile(const Sm90KvMaps &maps, uint32_t dst, uint32_t bar, int kvh, int row,
                                             int blk, uint64_t pol) {
#if VATTN_SM90A
  constexpr int BOX = 16 * 128;
  mbar_arrive_expect_tx(bar, 2 * NB * BOX);
#pragma unroll
  for (int cb = 0; cb < NB; ++cb) {
    tma_load_4d_pol(dst + cb * BOX, &maps.k, cb * (128 / E), kvh, row, blk, bar, pol);
    tma_load_4d_pol(dst + (NB + cb) * BOX, &maps.v, cb * (128 / E), kvh, row, blk, bar, pol);
  }
#endif
}

// NH = 2: CTA (x, y) runs KV heads 2x and 2x + 1 on items of at most 8 rows
// (one head's): Q row r of the CTA is item row r % 8 of head 2x + r / 8, so
// the mma rows gq / gq + 8 of a lane belong to the two heads, and each
// product runs once per head with the other head's A rows zeroed.
template <class T, int CACHE, int HS, int NH, bool TMA>
__device__ __forceinline__ void decode_body(const AttnParams &p, const Sm90KvMaps &maps) {
  using S = DecShape<HS, CACHE, NH, TMA>;
  static_assert(NH == 1 || NH == 2, "one or two KV heads per CTA");
  static_assert(!TMA || (NH == 1 && S::NB >= 1), "TMA boxes: one KV head, rows of >= 128 bytes");
  constexpr int KT = S::KT, SROW = S::SROW, KSROW = S::KSROW, NST = S::NST;
  constexpr int DF = HS / 8;
  constexpr bool kFp8 = S::kFp8;
  using KVT = typename std::conditional<kFp8, uint8_t, T>::type;
  using MT = typename std::conditional<kFp8, __half, T>::type;  // mma operand type
  constexpr int CH1 = kFp8 ? HS / 16 : HS / 8;  // 16-byte chunks per key row of one head
  constexpr int CH = NH * CH1;                   // ... of a staged row (NH heads)
  static_assert(32 % CH == 0, "a warp copies whole key rows");
  constexpr int RPI = 32 / CH;                 // key rows per warp-wide copy
  constexpr int NI = KT / RPI;                 // copies per lane per K (and V) tile

  extern __shared__ uint4 smem_u4[];
  char *smem = reinterpret_cast<char *>(smem_u4);
  MT *sQ;
  char *body;
  if constexpr (TMA) {  // swizzled boxes: the body starts 1024-byte aligned
    smem += (1024u - (smem_u32(smem) & 1023u)) & 1023u;
    body = smem;
    sQ = reinterpret_cast<MT *>(smem + S::BODY);
  } else {
    sQ = reinterpret_cast<MT *>(smem);
    body = smem + S::Q_BYTES;
  }

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // TMA: this warp's stage barriers (one arrival: lane 0's, with the
  // stage's bytes); bit s of ph is the parity stage s waits for next.
  uint32_t bar0 = 0, ph = 0;
  if constexpr (TMA) {
    bar0 = smem_u32(smem + S::BODY + S::Q_BYTES) + warp * NST * 8;
    if (lane == 0) dec_bars_init<NST>(bar0);
    __syncwarp();
  }
  const int gq = lane >> 2, tq = lane & 3;
  const int kvh = blockIdx.x * NH;  // the CTA's (first) KV head
  // Q row r of the CTA: item row r (NH = 1) or r % 8 of KV head kvh + r / 8.
  auto row_item = [](int r) { return NH == 2 ? r & 7 : r; };
  auto row_kvh = [&](int r) { return NH == 2 ? kvh + (r >> 3) : kvh; };
  const int G = p.group;
  const int first = *p.first_item;
  const int n_items = *p.num_items;
  const KVT *kbase = static_cast<const KVT *>(p.k);
  const KVT *vbase = static_cast<const KVT *>(p.v);
  ScoreCtx sc = score_ctx_of(p);  // per-item fields (causal, kend) set below

  char *wbase = body + warp * S::WARP_BYTES;
  // The first key of this warp's tile t of an item whose keys start at
  // kstart (warp w takes the tiles w, w + 4, ...), and the tile's block-table
  // entry; *off = the tile's first row in its block.
  auto tile_key = [&](int kstart, int t) { return kstart + (warp + S::kWarps * t) * KT; };
  auto tile_entry = [&](int k0, int *off) {
    const int b = k0 / p.block_size;
    *off = k0 - b * p.block_size;
    return b;
  };

  for (int item_idx = first + blockIdx.y; item_idx < n_items; item_idx += gridDim.y) {
    // The block ids of the warp's first 32 tiles are requested with the
    // item's request, not after it: a decode item's block-table row is its
    // request's index (the builder's bt_row; checked below), and its first
    // key is kv_begin unless a window moves it.  Row entries past the
    // request's blocks are read but unused (the index stays in the row).
    // H100, same-run A/B, eager us, 3 rounds: 1x512 10.21-10.43 ->
    // 9.82-9.95, 2x1024 12.93-13.06 -> 12.58-12.77, fp8 1x1024 10.72-10.91
    // -> 10.32-10.59, 1x32768 54.85-55.23 -> 54.66-54.93; none slower.
    int spec_blk, spec_off, spec_kv;
    {
      const AttnItem &si = p.items[item_idx];
      spec_kv = si.kv_begin;
      const int b = tile_entry(tile_key(spec_kv, lane), &spec_off);
      const int col = min(b, static_cast<int>(p.bt_stride) - 1);  // item's tile count not known yet
      spec_blk = p.block_table[static_cast<int64_t>(si.req) * p.bt_stride + col];
    }
    const ItemCtx ic = item_begin(p, item_idx, KT, &sc);
    const AttnItem &it = ic.it;
    const AttnReq &rq = ic.rq;
    const ItemKeys &ik = ic.ik;
    const int32_t *bt_row = ic.bt_row;

    // TMA: the previous item's generic writes to the body (epilogue, merge)
    // come before this item's boxes land there.
    if constexpr (TMA) dec_fence_proxy();
    __syncthreads();  // the previous item is done with shared memory
    int head[2];
    RowCtx rc;
    if constexpr (NH == 1) {
      rc = row_ctx_of(p, it, row_map_of(p, it, rq, kvh), ik.qpos0, 0, gq, head);
    } else {  // rows gq and gq + 8: item row gq of heads kvh and kvh + 1
#pragma unroll
      for (int i = 0; i < 2; ++i)
        row_ctx_set(p, it, row_map_of(p, it, rq, kvh + i), ik.qpos0, gq, i, &rc, &head[i]);
    }
    const int kstart = ik.kstart, kend = ik.kend;
    const int nw = ik.ntiles > warp ? (ik.ntiles - warp + S::kWarps - 1) / S::kWarps : 0;
    // Keys [vis_lo, vis_hi) are visible to every row of the item: tiles
    // inside skip the masks (rows past num_rows hold Q = 0, finite scores,
    // and are never written).
    const int qmin = ik.qmin, qmax = ik.qmax;
    int vis_hi = kend;
    if (sc.causal && vis_hi > qmin + 1) vis_hi = qmin + 1;
    if (p.window_right >= 0 && vis_hi > qmin + p.window_right + 1) vis_hi = qmin + p.window_right + 1;
    const int vis_lo = p.window_left >= 0 ? qmax - p.window_left : kstart;

    float o[DF][4];
#pragma unroll
    for (int f = 0; f < DF; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    // Block ids of this warp's tiles [tile0, tile0 + 32), one per lane
    // (and each tile's first row in its block), so the division by
    // block_size runs once per 32 tiles.
    int blk_reg = 0, off_reg = 0;
    auto fetch_ids = [&](int tile0) {
      const int t = tile0 + lane;
      const int b = tile_entry(tile_key(kstart, t), &off_reg);
      blk_reg = t < nw ? bt_row[b] : 0;
    };
    // Copy geometry: a lane copies 16-byte chunk lch of the tile's key rows
    // r0, r0 + RPI, ... (K and V), from byte offsets fixed per item; per
    // tile only the block base and the row count change.
    // (NH = 2: chunks [0, CH1) from head kvh, [CH1, CH) from kvh + 1; one
    // span of the NHD layout.)
    const int lch = lane % CH, r0 = lane / CH;
    const int lkvh = kvh + lch / CH1, lc1 = lch % CH1;
    const int64_t k_lane =
        (static_cast<int64_t>(lkvh) * p.k_stride_head + r0 * p.k_stride_tok) * sizeof(KVT) + lc1 * 16;
    const int64_t v_lane =
        (static_cast<int64_t>(lkvh) * p.v_stride_head + r0 * p.v_stride_tok) * sizeof(KVT) + lc1 * 16;
    const int64_t k_step = RPI * p.k_stride_tok * static_cast<int64_t>(sizeof(KVT));
    const int64_t v_step = RPI * p.v_stride_tok * static_cast<int64_t>(sizeof(KVT));
    const uint32_t s_lane = smem_u32(wbase) + r0 * S::RAW_ROW + lch * 16;
    const uint64_t pol = l2_evict_first_policy();
    int st_next = 0;  // stage of the next tile issued (tile t sits in stage t % NST)
    // Tiles in flight ahead of the one computed: NST - 1, or where DecShape
    // says it varies: fp8 (kVarAhead) 2 for an item that covers its rows'
    // keys on a device that wants the depth (AttnParams::dec_ahead) and 1
    // for a split part; 16-bit (kAhead16) 1 for an item of at least 4 x
    // dec_one_ahead_tiles tiles when the launch's working CTAs outnumber
    // dec_sms (CTA-uniform: the counts are the plan's).
    int ahead = NST - 1;
    if constexpr (S::kVarAhead) ahead = it.ws_base < 0 && p.dec_ahead >= 2 ? 2 : 1;
    if constexpr (S::kAhead16) {
      if (p.dec_one_ahead_tiles > 0 && ik.ntiles >= S::kWarps * p.dec_one_ahead_tiles &&
          static_cast<int64_t>(n_items - first) * gridDim.x > p.dec_sms)
        ahead = 1;
    }
    auto issue = [&](int t) {  // warp-uniform; t < nw
      if ((t & 31) == 0) {
        if (t == 0 && ic.rq.bt_row == it.req && kstart == spec_kv) {
          blk_reg = lane < nw ? spec_blk : 0;
          off_reg = spec_off;
        } else {
          fetch_ids(t);
        }
      }
      const int k0 = tile_key(kstart, t);
      const int64_t blk = __shfl_sync(0xffffffffu, blk_reg, t & 31);
      const int64_t off0 = __shfl_sync(0xffffffffu, off_reg, t & 31);
      if constexpr (TMA) {
        // Lane 0: the tile's K and V boxes (all 16 rows of the block: rows
        // past the item's keys are masked in S and zeroed in V on arrival).
        static_assert(S::STAGE == 2 * S::NB * 16 * 128, "dec_tma_tile's bytes");
        if (lane == 0)
          dec_tma_tile<S::NB, sizeof(KVT)>(maps, smem_u32(wbase) + st_next * S::STAGE, bar0 + 8 * st_next, kvh,
                           static_cast<int>(off0), static_cast<int>(blk), pol);
        st_next = st_next + 1 == NST ? 0 : st_next + 1;
        return;
      }
      const char *kp = reinterpret_cast<const char *>(kbase) +
                       (blk * p.k_stride_block + off0 * p.k_stride_tok) * sizeof(KVT) + k_lane;
      const char *vp = reinterpret_cast<const char *>(vbase) +
                       (blk * p.v_stride_block + off0 * p.v_stride_tok) * sizeof(KVT) + v_lane;
      const uint32_t sd = s_lane + st_next * S::STAGE;
      st_next = st_next + 1 == NST ? 0 : st_next + 1;
      const int nvalid = kend - k0 - r0;  // row r0 + RPI i holds a key iff RPI i < nvalid
      // Rows of >= 128 bytes are fetched into L2 by whole 128-byte lines:
      // H100, bf16 head size 128: 32x4096 93.0 -> 94.8% of copy, 8x8192
      // 85.5 -> 87.5%; 256-byte lines measured slightly lower, and over-fetch
      // rows of 128 bytes (head size 64: 84 -> 78%).
      // Every copy is tagged evict-first in L2 (each K / V byte is read
      // once): H100, same-run A/B, 1x32768 57.3 -> 55.2-55.6 us, 256x512
      // 197.4 -> 193.4, fp8 8x8192 61.3 -> 59.3-59.7; no shape slower.
      constexpr int kPf = HS * sizeof(KVT) >= 128 ? 128 : 0;
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        const int n = RPI * i < nvalid ? 16 : 0;  // 0: zero-fill (V rows must stay finite)
        cp_async_16_pol<kPf>(sd + i * RPI * S::RAW_ROW, kp + i * k_step, n, pol);
        cp_async_16_pol<kPf>(sd + (KT + i * RPI) * S::RAW_ROW, vp + i * v_step, n, pol);
      }
    };
#pragma unroll
    for (int s = 0; s < NST - 1; ++s) {
      if (s < ahead && s < nw) issue(s);
      if constexpr (!TMA) cp_async_commit();
    }
    // Q after the first K/V copies are in flight: its load latency overlaps
    // theirs (a CTA's prologue is a visible share of a short item).
    for (int c = tid; c < 16 * (HS / 8); c += S::kThreads) {
      const int row = c / (HS / 8), ch = c - row * (HS / 8);
      uint4 val = make_uint4(0, 0, 0, 0);
      if (row_item(row) < it.num_rows) {
        val = *reinterpret_cast<const uint4 *>(q_row_chunk<T>(p, it, rq, row_kvh(row), row_item(row), ch));
        if constexpr (kFp8 && !std::is_same<T, __half>::value) {  // bf16 -> fp16
          uint32_t *u = reinterpret_cast<uint32_t *>(&val);
#pragma unroll
          for (int e = 0; e < 4; ++e) u[e] = bf16x2_as_h2(u[e]);
        }
      }
      *reinterpret_cast<uint4 *>(sQ + row * SROW + ch * 8) = val;
    }

    __syncthreads();  // Q visible
    // The A fragments of Q for S = Q K^T, chunk kk of 16 dims.  fp8: lane
    // (gq, tq) holds dims 16kk + 4tq .. +3 of rows gq and gq + 8 (the S
    // product's dim permutation, below).
    auto q_frag = [&](int kk, uint32_t (&a)[4]) {
      if constexpr (kFp8) {
        const MT *q0 = sQ + gq * SROW + 4 * tq + kk * 16;
        const uint2 qa = *reinterpret_cast<const uint2 *>(q0);
        const uint2 qb = *reinterpret_cast<const uint2 *>(q0 + 8 * SROW);
        a[0] = qa.x;
        a[1] = qb.x;
        a[2] = qa.y;
        a[3] = qb.y;
      } else {
        ldmatrix_x4(a, sQ + (lane & 15) * SROW + kk * 16 + (lane >> 4) * 8);
      }
    };
    // Held in registers up to head size 128 (loaded once per item), else
    // read from shared memory per tile.  fp8 at head size 64 reads them too:
    // in registers they cost it a resident CTA per SM.  fp8 at 128 is held
    // to two CTAs per SM by its registers either way; per tile it saves 16
    // shared loads and the moves that put their halves in operand order.
    constexpr bool kQReg = HS <= 128 && (!kFp8 || HS == 128);
    uint32_t qf[kQReg ? HS / 16 : 1][4];
    if constexpr (kQReg) {
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) q_frag(kk, qf[kk]);
    }
    auto q_operand = [&](int kk, uint32_t (&a)[4]) {  // A fragment kk of Q
      if constexpr (kQReg) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[e] = qf[kk][e];
      } else {
        q_frag(kk, a);
      }
    };
    // The A fragment a with the rows of head h only: all of it (NH = 1), or
    // (NH = 2) h = 0: rows gq, registers 0 and 2; h = 1: rows gq + 8,
    // registers 1 and 3.
    auto head_rows = [](const uint32_t (&a)[4], int h, uint32_t (&ah)[4]) {
      if constexpr (NH == 1) {
#pragma unroll
        for (int e = 0; e < 4; ++e) ah[e] = a[e];
      } else {
        ah[0] = h == 0 ? a[0] : 0u;
        ah[1] = h == 1 ? a[1] : 0u;
        ah[2] = h == 0 ? a[2] : 0u;
        ah[3] = h == 1 ? a[3] : 0u;
      }
    };
    int st_use = 0;  // stage of tile t
    for (int t = 0; t < nw; ++t) {
      if (t + ahead < nw) issue(t + ahead);
      if constexpr (TMA) {
        dec_bar_wait(bar0 + 8 * st_use, (ph >> st_use) & 1u);
        ph ^= 1u << st_use;
      } else {
        static_assert(!S::kVarAhead, "cp.async keeps NST - 1 groups ahead");
        cp_async_commit();
        cp_async_wait_group<NST - 1>();
        __syncwarp();
      }
      const char *st = wbase + st_use * S::STAGE;
      st_use = st_use + 1 == NST ? 0 : st_use + 1;
      const int k0 = tile_key(kstart, t);
      if constexpr (TMA) {
        // V rows past the item's keys hold whatever the block holds; P is 0
        // there, and 0 x (inf or NaN) is not, so they become zeros.  The
        // fence orders these generic writes before the stage's next box.
        const int nv = kend - k0;
        if (nv < KT) {
          for (int e = lane; e < (KT - nv) * S::NB * 8; e += 32) {
            const int r = nv + e / (S::NB * 8), c = e % (S::NB * 8);
            *reinterpret_cast<uint4 *>(const_cast<char *>(st) + S::NB * S::BOX + swz_chunk<KT>(r, c)) =
                make_uint4(0, 0, 0, 0);
          }
          dec_fence_proxy();
          __syncwarp();
        }
      }

      // ---- S = Q K^T (16 rows x 16 keys)
      float s[2][4];
#pragma unroll
      for (int f = 0; f < 2; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.f;
      if constexpr (kFp8) {
        // Lane (gq, tq) holds dims 16kk + 4tq .. +3 of keys gq and gq + 8
        // and the same dims of query rows gq and gq + 8.
        const uint8_t *kr0 = reinterpret_cast<const uint8_t *>(st) + gq * S::RAW_ROW + 4 * tq;
#pragma unroll
        for (int kk = 0; kk < HS / 16; ++kk) {
          uint32_t a[4];
          q_operand(kk, a);
#pragma unroll
          for (int h = 0; h < NH; ++h) {
            uint32_t ah[4];
            head_rows(a, h, ah);
            uint32_t w0, w1;
            if constexpr (TMA) {  // rows gq and gq + 8 (same swizzle): 16-byte chunk kk
              const uint8_t *kb = reinterpret_cast<const uint8_t *>(st) + swz_chunk<KT>(gq, kk) + 4 * tq;
              w0 = *reinterpret_cast<const uint32_t *>(kb);
              w1 = *reinterpret_cast<const uint32_t *>(kb + 8 * 128);
            } else {
              w0 = *reinterpret_cast<const uint32_t *>(kr0 + h * HS + kk * 16);
              w1 = *reinterpret_cast<const uint32_t *>(kr0 + 8 * S::RAW_ROW + h * HS + kk * 16);
            }
            uint32_t b0, b1, b2, b3;
            fp8x4_to_h2<CACHE>(w0, b0, b1);
            fp8x4_to_h2<CACHE>(w1, b2, b3);
            mma_16816<MT>(s[0], ah, b0, b1);
            mma_16816<MT>(s[1], ah, b2, b3);
          }
        }
      } else {
        const T *sK = reinterpret_cast<const T *>(st);
#pragma unroll
        for (int kk = 0; kk < HS / 16; ++kk) {
          uint32_t a[4];
          q_operand(kk, a);
#pragma unroll
          for (int h = 0; h < NH; ++h) {
            uint32_t ah[4], b[4];
            head_rows(a, h, ah);
            if constexpr (TMA)  // key row (lane & 7) + 8 (lane >> 4), 16-byte chunk 2 kk + bit 3
              ldmatrix_x4(b, st + swz_chunk<KT>((lane & 7) + 8 * (lane >> 4), 2 * kk + ((lane >> 3) & 1)));
            else
              ldmatrix_x4(b, sK + ((lane & 7) + 8 * (lane >> 4)) * KSROW + h * HS + kk * 16 + 8 * ((lane >> 3) & 1));
            mma_16816<T>(s[0], ah, b[0], b[1]);
            mma_16816<T>(s[1], ah, b[2], b[3]);
          }
        }
      }

      const float pre = scores_to_logits(s, sc, rc, k0, tq);
      if (k0 < vis_lo || k0 + KT > vis_hi) apply_masks(s, sc, rc, k0, tq);
      online_softmax(s, o, m, l, pre);

      // ---- O += P V (16 keys)
      if constexpr (kFp8) {
        uint32_t a[4];
        a[0] = Elem<MT>::pack2(s[0][0], s[0][1]);
        a[1] = Elem<MT>::pack2(s[0][2], s[0][3]);
        a[2] = Elem<MT>::pack2(s[1][0], s[1][1]);
        a[3] = Elem<MT>::pack2(s[1][2], s[1][3]);
        // Lane (gq, tq) reads dims 32c + 4gq .. +3 of keys 2tq, 2tq + 1,
        // 2tq + 8, 2tq + 9; n-tile 4c + j holds dims 32c + 4n + j.
        const uint8_t *vr = reinterpret_cast<const uint8_t *>(st) + (KT + 2 * tq) * S::RAW_ROW + 4 * gq;
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          uint32_t ah[4];
          head_rows(a, h, ah);
#pragma unroll
          for (int c = 0; c < HS / 32; ++c) {
            uint32_t w0, w1, w2, w3;
            if constexpr (TMA) {
              // Rows 2tq (+ 8) and 2tq + 1 (+ 9): bytes 32 c + 4 gq are in
              // 16-byte chunk 2 c + gq / 4.
              const uint8_t *vb = reinterpret_cast<const uint8_t *>(st) + S::NB * S::BOX + 4 * (gq & 3);
              const int ch = 2 * c + (gq >> 2);
              const uint8_t *v0 = vb + swz_chunk<KT>(2 * tq, ch), *v1 = vb + swz_chunk<KT>(2 * tq + 1, ch);
              w0 = *reinterpret_cast<const uint32_t *>(v0);
              w1 = *reinterpret_cast<const uint32_t *>(v1);
              w2 = *reinterpret_cast<const uint32_t *>(v0 + 8 * 128);
              w3 = *reinterpret_cast<const uint32_t *>(v1 + 8 * 128);
            } else {
              const uint8_t *vc = vr + h * HS + 32 * c;
              w0 = *reinterpret_cast<const uint32_t *>(vc);
              w1 = *reinterpret_cast<const uint32_t *>(vc + S::RAW_ROW);
              w2 = *reinterpret_cast<const uint32_t *>(vc + 8 * S::RAW_ROW);
              w3 = *reinterpret_cast<const uint32_t *>(vc + 9 * S::RAW_ROW);
            }
            uint32_t lo0[4], lo1[4];  // [j]: keys (2tq, 2tq + 1) / (2tq + 8, 2tq + 9) of dim j
            fp8x4_to_h2<CACHE>(__byte_perm(w0, w1, 0x5140), lo0[0], lo0[1]);
            fp8x4_to_h2<CACHE>(__byte_perm(w0, w1, 0x7362), lo0[2], lo0[3]);
            fp8x4_to_h2<CACHE>(__byte_perm(w2, w3, 0x5140), lo1[0], lo1[1]);
            fp8x4_to_h2<CACHE>(__byte_perm(w2, w3, 0x7362), lo1[2], lo1[3]);
#pragma unroll
            for (int j = 0; j < 4; ++j) mma_16816<MT>(o[4 * c + j], ah, lo0[j], lo1[j]);
          }
        }
      } else {
        const T *sV = reinterpret_cast<const T *>(st + KT * S::RAW_ROW);
        uint32_t a[4];
        a[0] = Elem<T>::pack2(s[0][0], s[0][1]);
        a[1] = Elem<T>::pack2(s[0][2], s[0][3]);
        a[2] = Elem<T>::pack2(s[1][0], s[1][1]);
        a[3] = Elem<T>::pack2(s[1][2], s[1][3]);
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          uint32_t ah[4];
          head_rows(a, h, ah);
#pragma unroll
          for (int d2 = 0; d2 < HS / 16; ++d2) {
            uint32_t b[4];
            if constexpr (TMA)  // key row (lane & 7) + 8 bit 3, 16-byte chunk 2 d2 + (lane >> 4)
              ldmatrix_x4_trans(b, st + S::NB * S::BOX +
                                       swz_chunk<KT>((lane & 7) + 8 * ((lane >> 3) & 1), 2 * d2 + (lane >> 4)));
            else
              ldmatrix_x4_trans(b, sV + ((lane & 7) + 8 * ((lane >> 3) & 1)) * KSROW + h * HS + d2 * 16 +
                                       8 * (lane >> 4));
            mma_16816<T>(o[2 * d2], ah, b[0], b[1]);
            mma_16816<T>(o[2 * d2 + 1], ah, b[2], b[3]);
          }
        }
      }
      __syncwarp();  // this stage may be overwritten now
    }
    if constexpr (!TMA) cp_async_wait_all();

    // ---- merge the four warps' states through shared memory
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
      l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
    __syncthreads();  // every warp is done with its stages
    float *red_o = reinterpret_cast<float *>(body);             // [4][16][RED_ROW]
    float *red_m = red_o + S::kWarps * 16 * S::RED_ROW;         // [4][16]
    float *red_l = red_m + S::kWarps * 16;                      // [4][16]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = gq + 8 * i;
      if (row_item(row) >= it.num_rows) continue;  // never read (a decode token of G heads fills G rows)
      if (tq == 0) {
        red_m[warp * 16 + row] = m[i];
        red_l[warp * 16 + row] = l[i];
      }
      float *dst = red_o + (warp * 16 + row) * S::RED_ROW;
      if constexpr (kFp8) {  // undo the P V dim permutation
#pragma unroll
        for (int c = 0; c < HS / 32; ++c) {
          *reinterpret_cast<float4 *>(dst + 32 * c + 8 * tq) =
              make_float4(o[4 * c][2 * i], o[4 * c + 1][2 * i], o[4 * c + 2][2 * i], o[4 * c + 3][2 * i]);
          *reinterpret_cast<float4 *>(dst + 32 * c + 8 * tq + 4) =
              make_float4(o[4 * c][2 * i + 1], o[4 * c + 1][2 * i + 1], o[4 * c + 2][2 * i + 1],
                          o[4 * c + 3][2 * i + 1]);
        }
      } else {
#pragma unroll
        for (int df = 0; df < DF; ++df)
          *reinterpret_cast<float2 *>(dst + df * 8 + 2 * tq) = make_float2(o[df][2 * i], o[df][2 * i + 1]);
      }
    }
    __syncthreads();
    for (int e = tid; e < 16 * (HS / 4); e += S::kThreads) {
      const int row = e / (HS / 4), d = 4 * (e - row * (HS / 4));
      const int irow = row_item(row), rkvh = row_kvh(row);
      if (irow >= it.num_rows) continue;
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < S::kWarps; ++w) M = fmaxf(M, red_m[w * 16 + row]);
      float L = 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < S::kWarps; ++w) {
        const float mw = red_m[w * 16 + row];
        const float wt = mw == -INFINITY ? 0.f : exp2f(mw - M);
        L += red_l[w * 16 + row] * wt;
        const float4 v = *reinterpret_cast<const float4 *>(red_o + (w * 16 + row) * S::RED_ROW + d);
        acc.x += wt * v.x;
        acc.y += wt * v.y;
        acc.z += wt * v.z;
        acc.w += wt * v.w;
      }
      const int lr = it.q_row0 + irow;
      const int h = rkvh * G + lr % G;
      float lse, f;
      final_stats(p, it, M, L, h, &lse, &f);
      if (it.ws_base < 0) {
        const int64_t tok = rq.q_start + lr / G;
        T *out = static_cast<T *>(p.out) + tok * p.o_stride_tok +
                 static_cast<int64_t>(h) * p.o_stride_head + d;
        *reinterpret_cast<uint2 *>(out) =
            make_uint2(Elem<T>::pack2(acc.x * f, acc.y * f), Elem<T>::pack2(acc.z * f, acc.w * f));
        if (d == 0) store_lse(p, h, tok, lse);
      } else {
        const int64_t wr = (static_cast<int64_t>(it.ws_base) + irow) * p.num_kv_heads + rkvh;
        *reinterpret_cast<float4 *>(p.ws_o + wr * HS + d) =
            make_float4(acc.x * f, acc.y * f, acc.z * f, acc.w * f);
        if (d == 0) p.ws_lse[wr] = lse;
      }
    }
    if (it.merge != 0) {
#pragma unroll 1
      for (int h = 0; h < NH; ++h)  // each KV head's tile merges on its own counter
        merge_split_tile<T, HS, true>(p, it, rq, kvh + h, reinterpret_cast<float *>(body), S::kThreads,
                                      [] { __syncthreads(); });
    }
  }
}

// TMA: the sm_90a instance whose K / V tiles arrive as TMA boxes (one KV
// head per CTA, key rows of >= 128 bytes: has_decode_tma in
// attention_dispatch.cuh; the launch passes maps only when they encode).
template <class T, int CACHE, int HS, int NH = 1, bool TMA = false>
__global__ void __launch_bounds__(128) decode_kernel(const AttnParams p, const __grid_constant__ Sm90KvMaps maps) {
  if constexpr (TMA) {
#if VATTN_SM90A
    decode_body<T, CACHE, HS, NH, true>(p, maps);
#endif
  } else {
    decode_body<T, CACHE, HS, NH, false>(p, maps);
  }
}

}  // namespace kern
}  // namespace vattn
