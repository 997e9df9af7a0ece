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
// softmax and epilogue code is shared.  Keys stream in BN-key tiles (96 at
// head size 128, 128 at 64) through 3 shared buffers (cp.async), one CTA
// barrier per tile.  Per tile t a warpgroup
//   issues S_t = Q K_t^T (wgmma m64nBNk16, Q and K from shared memory),
//   issues O += P_{t-1} V_{t-1} (m64nHSk16, P from registers, V MN-major),
//   waits for S_t and runs scale / soft-cap / ALiBi / masks / softmax on it
//     while the P V product is still on the tensor cores,
//   waits for P V, rescales O when the row maximum grew, packs P_t;
// then every thread waits for tile t + 1, the barrier frees buffer t - 1 and
// tile t + 2 is fetched into it.  The other warpgroup's work overlaps too.
// Final rows leave through the Q buffer as 16-byte stores.
//
// Shared memory (1024-byte aligned, 128-byte swizzle; see wgmma.cuh):
//   Q [HS / 64][BM][64], 3 x (K [HS / 64][BN][64], V [HS / 64][BN][64]),
//   3 x BN (K, V) int64 element offsets.
// HS = 128: 32 + 3 x 48 + 4.5 KiB (+1 KiB alignment slack) = 181.5 KiB, one
// CTA per SM.  Registers: S BN / 2 + O HS / 2 fp32 and P BN / 4 32-bit per
// thread (222 at head size 128).
#pragma once

#include "attention_item.cuh"
#include "softmax.cuh"
#include "wgmma.cuh"

namespace vattn {
namespace kern {

template <int HS>
struct Sm90Shape {
  static_assert(HS % 64 == 0 && HS <= 128, "head size 64 or 128");
  // Key tile: at head size 128, 96 keys (3 K / V buffers, Q and the offset
  // ring fit in shared memory up to 112; H100, 112 against 96: -7% on
  // 16x1024, +1.5% on 1x16384 causal); at head size 64, 128 keys.
  static constexpr int BM = 128, BN = HS == 64 ? 128 : 96, kThreads = 256, kStages = 3;
  static constexpr int kQBytes = BM * HS * 2;     // 16-bit elements
  static constexpr int kTileBytes = BN * HS * 2;  // one K (or V) tile
  static constexpr int kOffBytes = kStages * BN * 16;  // per-key (K, V) offset ring
  static constexpr size_t smem_bytes() {
    return 1024 + kQBytes + static_cast<size_t>(kStages) * 2 * kTileBytes + kOffBytes;
  }
  static_assert(BM == AttnShape<HS>::BM, "items are tiled for attention_kernel's BM");
  static_assert(1024 + kQBytes + kStages * 2 * kTileBytes + kOffBytes <= 227 * 1024, "shared memory");
  static_assert(kTileBytes % 1024 == 0, "swizzled tiles stay 1024-byte aligned");
};

// Byte offset of 16-byte chunk ch of row r in a swizzled [HS / 64][R][64] tile.
template <int R>
__device__ __forceinline__ uint32_t swz_chunk(int r, int ch) {
  return static_cast<uint32_t>((ch >> 3) * R * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

template <class T, int HS>
__global__ void __launch_bounds__(256, 1) attention_sm90_kernel(const AttnParams p) {
#if VATTN_SM90A
  using S = Sm90Shape<HS>;
  constexpr int BM = S::BM, BN = S::BN, ST = S::kStages;
  constexpr int DF = HS / 8;  // 8-wide output fragments
  constexpr int NF = BN / 8;  // 8-wide score fragments
  constexpr int CH = HS / 8;  // 16-byte chunks per row

  extern __shared__ uint8_t smem_raw[];
  // Offset (not a round trip through an integer) so the compiler keeps the
  // shared address space: plain LDS / STS for sOff.
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t *sQ = smem;
  uint8_t *sKV = sQ + S::kQBytes;  // stage s: K at sKV + 2 s kTileBytes, V after it
  // sOff[(t % ST) * BN + r]: (K, V) element offsets of key r of tile t,
  // computed an iteration before the tile's copies need them (one block
  // lookup per key, not per copied chunk).
  longlong2 *sOff = reinterpret_cast<longlong2 *>(sKV + ST * 2 * S::kTileBytes);
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

  // Loader geometry: thread tid copies chunk column ch of rows r0 + i RP, so
  // its swizzled destination is fixed up to the row step (RP % 8 == 0).
  constexpr int RP = S::kThreads / CH;
  static_assert(S::kThreads % CH == 0 && RP % 8 == 0 && BN % RP == 0 && BM % RP == 0, "loader");
  const int ch = tid % CH, r0 = tid / CH;
  const uint32_t dQ = swz_chunk<BM>(r0, ch), dKV = swz_chunk<BN>(r0, ch);

  // wgmma descriptors (start addresses advance in 16-byte units).
  const uint64_t descQ = wgmma_desc(aQ + wg * 64 * 128, 16, 1024);
  const uint64_t descK0 = wgmma_desc(aKV, 16, 1024);
  const uint64_t descV0 = wgmma_desc(aKV + S::kTileBytes, BN * 128, 1024);
  auto stage16 = [](int t) { return static_cast<uint32_t>((t % ST) * 2 * S::kTileBytes) >> 4; };

  for (int item_idx = blockIdx.x; item_idx < n_items; item_idx += gridDim.x) {
    const ItemCtx ic = item_begin(p, item_idx, BN, &sc);
    const AttnItem &it = ic.it;
    const AttnReq &rq = ic.rq;
    const int32_t *bt_row = ic.bt_row;
    const int qpos0 = ic.ik.qpos0, kstart = ic.ik.kstart, kend = ic.ik.kend, ntiles = ic.ik.ntiles;
    // Key of row idx of tile t, clamped to kstart (a valid key) past kend.
    auto key_of = [&](int t, int idx) {
      const int j = kstart + t * BN + idx;
      return j < kend ? j : kstart;
    };
    // Tile t -> stage t % ST (its sOff entries in place); keys past kend
    // are zero-filled.
    auto load_kv = [&](int t) {
      const int k0 = kstart + t * BN;
      uint8_t *dk = sKV + (t % ST) * 2 * S::kTileBytes + dKV;
      uint8_t *dv = dk + S::kTileBytes;
#pragma unroll
      for (int i = 0; i < BN / RP; ++i) {
        const int r = r0 + i * RP;
        const bool ok = k0 + r < kend;
        const longlong2 o = sOff[(t % ST) * BN + r];
        cp_async_16(dk + i * RP * 128, kh + o.x + ch * 8, ok);
        cp_async_16(dv + i * RP * 128, vh + o.y + ch * 8, ok);
      }
    };

    __syncthreads();  // the previous item is done with shared memory
    // Group 0: Q (rows past num_rows zero: masked anyway) + tile 0; group 1: tile 1.
#pragma unroll
    for (int i = 0; i < BM / RP; ++i) {
      const int row = r0 + i * RP;
      const bool ok = row < it.num_rows;
      cp_async_16(sQ + dQ + i * RP * 128, ok ? q_row_chunk<T>(p, it, rq, kvh, row, ch) : p.q, ok);
    }
    // Offsets of tiles 0 .. ST - 1 (tile t + ST's are computed in
    // iteration t, after tile t's copies were issued).
    for (int e = tid; e < ST * BN; e += S::kThreads)
      if (e / BN < ntiles) sOff[e] = key_offsets(p, rq, bt_row, bs_shift, key_of(e / BN, e % BN));
    __syncthreads();
    if (ntiles > 0) load_kv(0);
    cp_async_commit();
    if (ntiles > 1) load_kv(1);
    cp_async_commit();

    const int wrow0 = warp * 16;
    int head[2];
    const RowCtx rc = row_ctx_of(p, it, kvh, qpos0, wrow0, gq, head);
    const bool warp_active = wrow0 < it.num_rows;
    const bool warp_full = wrow0 + 16 <= it.num_rows;
    const int wqmin = qpos0 + (it.q_row0 + wrow0) / G;
    const int wlast = (warp_full ? wrow0 + 16 : it.num_rows) - 1;
    const int wqmax = qpos0 + (it.q_row0 + (warp_active ? wlast : wrow0)) / G;

    float o[DF][4];
#pragma unroll
    for (int f = 0; f < DF; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float s[NF][4];
    uint32_t pa[BN / 16][4];  // P of the previous tile (A operand of P V)

    // The wgmma issue paths below are uniform over the warpgroup (no
    // per-warpgroup tile skipping: a warpgroup that sees none of a tile
    // multiplies it and masks it all), so the MMAs stay asynchronous.
    auto issue_s = [&](int t) {  // S = Q K_t^T
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk) {
        const uint32_t qoff = ((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4;
        const uint32_t koff = ((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4;
        wgmma_ss<BN, T>(s, descQ + qoff, descK0 + stage16(t) + koff, kk > 0);
      }
      wgmma_commit();
    };
    auto issue_pv = [&](int t) {  // O += P V_t
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2)
        wgmma_rs_tb<HS, T>(o, pa[k2], descV0 + stage16(t) + ((k2 * 16 * 128) >> 4));
      wgmma_commit();
    };
    // Scale / soft-cap / ALiBi / masks and the softmax step on S of tile t
    // (the unmasked path when the warp sees the whole tile).
    auto softmax_tile = [&](int t, float (&alpha)[2]) {
      const int k0 = kstart + t * BN, klast = k0 + BN - 1;
      bool full = warp_full && klast < kend;
      if (sc.causal) full = full && klast <= wqmin;
      if (p.window_left >= 0) full = full && wqmax - k0 <= p.window_left;
      if (p.window_right >= 0) full = full && klast - wqmin <= p.window_right;
      const float pre = scores_to_logits(s, sc, rc, k0, tq);
      if (!full) apply_masks(s, sc, rc, k0, tq);
      return softmax_update(s, m, l, alpha, pre);
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2) {
        pa[k2][0] = Elem<T>::pack2(s[2 * k2][0], s[2 * k2][1]);
        pa[k2][1] = Elem<T>::pack2(s[2 * k2][2], s[2 * k2][3]);
        pa[k2][2] = Elem<T>::pack2(s[2 * k2 + 1][0], s[2 * k2 + 1][1]);
        pa[k2][3] = Elem<T>::pack2(s[2 * k2 + 1][2], s[2 * k2 + 1][3]);
      }
    };
    // Tile t + 1 landed (visible to wgmma); after the barrier no warpgroup
    // reads buffer t - 1 any more: tile t + 2 is fetched into it.
    // off: the offsets of row tid of tile t + ST, computed at the start of
    // iteration t and stored into tile t's slot (its copies were issued two
    // iterations ago) here, before the barrier publishes them.
    auto next_tile = [&](int t, const longlong2 &off) {
      if (tid < BN && t + ST < ntiles) sOff[(t % ST) * BN + tid] = off;
      cp_async_wait_group<0>();
      fence_proxy_async();
      __syncthreads();
      if (t + 2 < ntiles) load_kv(t + 2);
      cp_async_commit();
    };
    auto next_offsets = [&](int t) {
      return tid < BN && t + ST < ntiles ? key_offsets(p, rq, bt_row, bs_shift, key_of(t + ST, tid))
                                         : make_longlong2(0, 0);
    };

    cp_async_wait_group<1>();
    fence_proxy_async();  // Q and tile 0 become visible to wgmma
    __syncthreads();
    if (ntiles > 0) {
      float alpha[2];
      longlong2 off = next_offsets(0);
      wgmma_fence();
      issue_s(0);
      wgmma_wait<0>();
      wgmma_fence_regs(s);
      softmax_tile(0, alpha);  // O is still zero: no rescale
      pack_p();
      next_tile(0, off);
      for (int t = 1; t < ntiles; ++t) {
        off = next_offsets(t);
        wgmma_fence_regs(o);
        wgmma_fence_regs(pa);
        wgmma_fence();
        issue_s(t);
        issue_pv(t - 1);  // under this tile's softmax
        wgmma_wait<1>();
        wgmma_fence_regs(s);
        const bool rescale = softmax_tile(t, alpha);
        wgmma_wait<0>();  // P V of tile t - 1 landed: O and pa are free
        wgmma_fence_regs(o);
        wgmma_fence_regs(pa);
        if (rescale) rescale_rows(o, alpha);
        pack_p();
        next_tile(t, off);
      }
      wgmma_fence_regs(o);
      wgmma_fence_regs(pa);
      wgmma_fence();
      issue_pv(ntiles - 1);
      wgmma_wait<0>();
      wgmma_fence_regs(o);
    }
    cp_async_wait_group<0>();

    if (warp_active) {
      if (it.ws_base < 0) {
        // Final rows: the warp's 16 normalised rows go through its slice of
        // the Q buffer (free: every S product has landed; XOR-swizzled 16-byte
        // chunks, no bank conflicts) and leave as 16-byte coalesced stores.
        uint8_t *stage = sQ + wrow0 * HS * 2;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float lse, f;
          row_final(p, it, m[i], l[i], head[i], &lse, &f);
          const int r = gq + 8 * i;
#pragma unroll
          for (int df = 0; df < DF; ++df)
            *reinterpret_cast<uint32_t *>(stage + r * HS * 2 + ((df ^ (r & 7)) << 4) + 4 * tq) =
                Elem<T>::pack2(o[df][2 * i] * f, o[df][2 * i + 1] * f);
          if (p.lse && tq == 0 && rc.valid[i]) {
            const int64_t tok = rq.q_start + (it.q_row0 + wrow0 + r) / G;
            p.lse[head[i] * p.lse_stride_head + tok * p.lse_stride_tok] = lse;
          }
        }
        __syncwarp();
        for (int e = lane; e < 16 * CH; e += 32) {
          const int r = e / CH, c = e % CH, row = wrow0 + r;
          if (row >= it.num_rows) continue;
          const int lr = it.q_row0 + row;
          const int64_t tok = rq.q_start + lr / G;
          const int h = kvh * G + lr % G;
          T *out = static_cast<T *>(p.out) + tok * p.o_stride_tok + static_cast<int64_t>(h) * p.o_stride_head;
          *reinterpret_cast<uint4 *>(out + c * 8) = *reinterpret_cast<const uint4 *>(stage + r * HS * 2 + ((c ^ (r & 7)) << 4));
        }
      } else {
        store_rows<T, DF>(p, it, rq, kvh, wrow0, gq, tq, o, m, l, rc, head);
      }
    }
    if (it.merge != 0) merge_split_tile<T, HS>(p, it, rq, kvh, reinterpret_cast<float *>(smem));
  }
#endif  // VATTN_SM90A
}

}  // namespace kern
}  // namespace vattn
