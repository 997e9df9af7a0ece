// attention_sm90.cuh -- the Hopper (sm_90a) variant of attention_kernel for
// 16-bit caches: the same items, masks, softmax and epilogue
// (attention_item.cuh, softmax.cuh), with the two products on warpgroup MMA
// (wgmma.cuh) instead of mma.sync.  launch_attention picks it on compute
// capability 9.0 for head sizes 64 and 128 with a bf16 / fp16 cache
// (VATTN_CUDA_SM90=0 in the environment keeps attention_kernel; tests use it
// to check both).
//
// CTA = 2 warpgroups (256 threads), BM = 128 query rows: warpgroup g owns
// rows [64 g, 64 g + 64), warp w (0..7) rows [16 w, 16 w + 16), which is
// attention_kernel's row split with one m16 tile per warp (MT = 1), so the
// softmax and epilogue code is shared.  Keys stream in BN = 128 key tiles
// through a 2-buffer cp.async pipeline, one CTA barrier per tile:
//   S[64 x BN] = Q K^T: wgmma m64nBNk16, Q and K from shared memory;
//   scale / soft-cap / ALiBi / masks / online softmax on the S registers;
//   O[64 x HS] += P V: wgmma m64nHSk16, P from registers (re-packed S
//   accumulators), V from shared memory (MN-major, transposed).
// While one warpgroup runs its softmax the other's MMAs keep the tensor
// cores busy.  A warpgroup skips tiles none of its 64 rows can see (wgmma
// is warpgroup-collective, so the skip is per warpgroup, not per warp).
//
// Shared memory (1024-byte aligned, 128-byte swizzle; see wgmma.cuh):
//   Q [HS / 64][BM][64], 2 x (K [HS / 64][BN][64], V [HS / 64][BN][64]),
//   then 2 x BN (K, V) int64 element offsets (one block lookup per key).
// HS = 128: 32 + 2 x 64 + 4 KiB (+1 KiB alignment slack) = 165 KiB, one CTA
// per SM; registers: S 64 + O HS / 2 fp32 per thread.
#pragma once

#include "attention_item.cuh"
#include "softmax.cuh"
#include "wgmma.cuh"

namespace vattn {
namespace kern {

template <int HS>
struct Sm90Shape {
  static_assert(HS % 64 == 0 && HS <= 128, "head size 64 or 128");
  static constexpr int BM = 128, BN = 128, kThreads = 256, kStages = 2;
  static constexpr int KB = HS / 64;               // 64-element column blocks per row
  static constexpr int kQBytes = BM * HS * 2;      // 16-bit elements
  static constexpr int kTileBytes = BN * HS * 2;   // one K (or V) tile
  static constexpr int kOffBytes = kStages * BN * 16;
  static constexpr size_t smem_bytes() {
    return 1024 + kQBytes + static_cast<size_t>(kStages) * 2 * kTileBytes + kOffBytes;
  }
  static_assert(BM == AttnShape<HS>::BM, "items are tiled for attention_kernel's BM");
};

// Byte offset of 16-byte chunk ch of row r in a swizzled [KB][R][64] tile.
template <int R>
__device__ __forceinline__ uint32_t swz_chunk(int r, int ch) {
  return static_cast<uint32_t>((ch >> 3) * R * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

template <class T, int HS>
__global__ void __launch_bounds__(256, 1) attention_sm90_kernel(const AttnParams p) {
#if VATTN_SM90A
  using S = Sm90Shape<HS>;
  constexpr int BM = S::BM, BN = S::BN;
  constexpr int DF = HS / 8;  // 8-wide output fragments
  constexpr int NF = BN / 8;  // 8-wide score fragments
  constexpr int CH = HS / 8;  // 16-byte chunks per row

  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                              ~static_cast<uintptr_t>(1023));
  uint8_t *sQ = smem;
  uint8_t *sKV = sQ + S::kQBytes;  // stage s: K at sKV + 2 s kTileBytes, V after it
  longlong2 *sOff = reinterpret_cast<longlong2 *>(sKV + S::kStages * 2 * S::kTileBytes);
  const uint32_t aQ = smem_u32(sQ), aKV = smem_u32(sKV);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp >> 2;
  const int gq = lane >> 2, tq = lane & 3;
  const int kvh = blockIdx.y;
  const int G = p.group;
  const int n_items = *p.num_items;
  const T *kh = static_cast<const T *>(p.k) + static_cast<int64_t>(kvh) * p.k_stride_head;
  const T *vh = static_cast<const T *>(p.v) + static_cast<int64_t>(kvh) * p.v_stride_head;
  const int bs = p.block_size;
  const int bs_shift = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  ScoreCtx sc = score_ctx_of(p);

  // Loader geometry: thread tid keeps chunk column ch of rows r0 + i RP, so
  // its swizzled destination is fixed up to the row step (RP % 8 == 0).
  constexpr int RP = S::kThreads / CH;
  static_assert(S::kThreads % CH == 0 && RP % 8 == 0 && BN % RP == 0 && BM % RP == 0, "loader");
  const int ch = tid % CH, r0 = tid / CH;
  const uint32_t dQ = swz_chunk<BM>(r0, ch), dKV = swz_chunk<BN>(r0, ch);

  // wgmma descriptors (start addresses advance in 16-byte units).
  const uint64_t descQ = wgmma_desc(aQ + wg * 64 * 128, 16, 1024);
  const uint64_t descK0 = wgmma_desc(aKV, 16, 1024);
  const uint64_t descV0 = wgmma_desc(aKV + S::kTileBytes, BN * 128, 1024);

  for (int item_idx = blockIdx.x; item_idx < n_items; item_idx += gridDim.x) {
    const AttnItem it = p.items[item_idx];
    const AttnReq rq = p.reqs[it.req];
    sc.causal = rq.causal != 0 && p.allow_causal != 0;
    const ItemKeys ik = item_keys(p, it, rq, sc.causal, BN);
    const int qpos0 = ik.qpos0, kstart = ik.kstart, kend = ik.kend, ntiles = ik.ntiles;
    sc.kend = kend;
    const int32_t *bt_row = p.block_table + static_cast<int64_t>(rq.bt_row) * p.bt_stride;
    auto fill_offsets = [&](int t, int idx) {
      const int j0 = kstart + t * BN + idx;
      sOff[(t % S::kStages) * BN + idx] = key_offsets(p, rq, bt_row, bs_shift, j0 < kend ? j0 : kstart);
    };
    // Tile t -> stage t % 2 (offsets in sOff); keys past kend zero-filled.
    auto load_kv = [&](int t) {
      const int k0 = kstart + t * BN;
      uint8_t *dk = sKV + (t % S::kStages) * 2 * S::kTileBytes + dKV;
      uint8_t *dv = dk + S::kTileBytes;
      const longlong2 *to = sOff + (t % S::kStages) * BN;
#pragma unroll
      for (int i = 0; i < BN / RP; ++i) {
        const int kr = r0 + i * RP;
        const longlong2 o = to[kr];
        const bool ok = k0 + kr < kend;
        cp_async_16(dk + i * RP * 128, kh + o.x + ch * 8, ok);
        cp_async_16(dv + i * RP * 128, vh + o.y + ch * 8, ok);
      }
    };

    __syncthreads();  // the previous item is done with shared memory
    // Q tile + tile 0 in group 0 (rows past num_rows zero: masked anyway).
#pragma unroll
    for (int i = 0; i < BM / RP; ++i) {
      const int row = r0 + i * RP;
      const bool ok = row < it.num_rows;
      cp_async_16(sQ + dQ + i * RP * 128, ok ? q_row_chunk<T>(p, it, rq, kvh, row, ch) : p.q, ok);
    }
    for (int e = tid; e < S::kStages * BN; e += S::kThreads)
      if (e / BN < ntiles) fill_offsets(e / BN, e % BN);
    __syncthreads();
    if (ntiles > 0) load_kv(0);
    cp_async_commit();

    const int wrow0 = warp * 16;
    int head[2];
    const RowCtx rc = row_ctx_of(p, it, kvh, qpos0, wrow0, gq, head);
    const bool warp_active = wrow0 < it.num_rows;
    const bool warp_full = wrow0 + 16 <= it.num_rows;
    const int wqmin = qpos0 + (it.q_row0 + wrow0) / G;
    // The warpgroup's rows decide which tiles it multiplies (uniform over its
    // 4 warps); the warp's own rows decide the unmasked path.
    const int grow0 = wg * 64;
    const bool wg_active = grow0 < it.num_rows;
    const int glast = (grow0 + 64 <= it.num_rows ? grow0 + 64 : it.num_rows) - 1;
    const int gqmin = qpos0 + (it.q_row0 + grow0) / G;
    const int gqmax = qpos0 + (it.q_row0 + (wg_active ? glast : grow0)) / G;
    const int wlast = (warp_full ? wrow0 + 16 : it.num_rows) - 1;
    const int wqmax = qpos0 + (it.q_row0 + (warp_active ? wlast : wrow0)) / G;

    float o[DF][4];
#pragma unroll
    for (int f = 0; f < DF; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    for (int t = 0; t < ntiles; ++t) {
      const int k0 = kstart + t * BN, klast = k0 + BN - 1;
      cp_async_wait_group<0>();
      fence_proxy_async();  // the landed tile (and Q) become visible to wgmma
      __syncthreads();      // ... of every thread; all warpgroups left tile t - 1
      if (t + 1 < ntiles) load_kv(t + 1);  // into tile t - 1's buffer
      cp_async_commit();
      if (t + 2 < ntiles)  // into tile t's offset slot (its load was issued)
        for (int e = tid; e < BN; e += S::kThreads) fill_offsets(t + 2, e);

      bool skip = !wg_active;
      if (sc.causal) skip = skip || k0 > gqmax;
      if (p.window_right >= 0) skip = skip || k0 - gqmax > p.window_right;
      if (p.window_left >= 0) skip = skip || gqmin - klast > p.window_left;
      if (skip) continue;
      const uint32_t stage16 = (t % S::kStages) * 2 * S::kTileBytes >> 4;

      // ---- S = Q K^T
      float s[NF][4];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        const uint32_t koff = ((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4;
        const uint32_t kkoff = ((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4;
        wgmma_ss<BN, T>(s, descQ + koff, descK0 + stage16 + kkoff, kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_regs(s);

      // ---- masks + online softmax (unmasked path when the warp sees the whole tile)
      bool full = warp_full && klast < kend;
      if (sc.causal) full = full && klast <= wqmin;
      if (p.window_left >= 0) full = full && wqmax - k0 <= p.window_left;
      if (p.window_right >= 0) full = full && klast - wqmin <= p.window_right;
      scores_to_logits(s, sc, rc, k0, tq);
      if (!full) apply_masks(s, sc, rc, k0, tq);
      online_softmax(s, o, m, l);

      // ---- O += P V
      uint32_t a[BN / 16][4];
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2) {
        a[k2][0] = Elem<T>::pack2(s[2 * k2][0], s[2 * k2][1]);
        a[k2][1] = Elem<T>::pack2(s[2 * k2][2], s[2 * k2][3]);
        a[k2][2] = Elem<T>::pack2(s[2 * k2 + 1][0], s[2 * k2 + 1][1]);
        a[k2][3] = Elem<T>::pack2(s[2 * k2 + 1][2], s[2 * k2 + 1][3]);
      }
      wgmma_fence_regs(o);
      wgmma_fence();
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2) wgmma_rs_tb<HS, T>(o, a[k2], descV0 + stage16 + ((k2 * 16 * 128) >> 4));
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_regs(o);
    }
    cp_async_wait_group<0>();

    if (warp_active) store_rows<T, DF>(p, it, rq, kvh, wrow0, gq, tq, o, m, l, rc, head);
    if (it.merge != 0) merge_split_tile<T, HS>(p, it, rq, kvh, reinterpret_cast<float *>(smem));
  }
#endif  // VATTN_SM90A
}

}  // namespace kern
}  // namespace vattn
