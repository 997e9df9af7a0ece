// attention_sm90.cuh -- the Hopper (sm_90a) variant of attention_kernel:
// the same items, masks, softmax and epilogue (attention_item.cuh,
// softmax.cuh), with the two products on warpgroup MMA (wgmma.cuh) instead
// of mma.sync.  launch_attention picks it on compute capability 9.0 for head
// sizes 64, 128 and 256 with a bf16 / fp16 cache and for head size 128 with
// an fp8 cache (VATTN_CUDA_SM90=0 in the environment keeps attention_kernel;
// tests use it to check both).
//
// Head size 256 (Sm90Shape::kQSmem; the differences from the description
// below): O holds 128 fp32 registers per consumer thread, so the S product
// reads Q from shared memory by descriptor (wgmma_ss) instead of registers;
// Q has one buffer (64 KiB), which the consumers release once the unit's
// last S product has landed and the producer refills with the next unit's
// Q after that unit's first tile; key tiles are 48 keys in 3 stages, and
// each key step issues the previous tile's P V before this tile's S; final
// rows leave through the staging rows in two column halves.  Plans built
// for this kernel have 128-row items, where attention_kernel's BM is 64 (it
// runs such items in two row ranges).  H100, same-run A/B, eager us,
// attention_kernel -> this (32-key tiles in 4 stages then): causal 16x1024
// 1636 -> 795, 4x4096 5696-5701 -> 2508-2519, 1x16384 22072-22095 ->
// 9494-9539, non-causal 4x4096 11535-11551 -> 4746-4823.
//
// fp8 caches (CACHE = e4m3 / e5m2; the differences from the description
// below): the products run in fp16 on K / V converted exactly from fp8
// (bf16 Q goes to fp16 once per unit, exact for |q| in [2^-14, 65504], as
// in the decode kernel).  Two producer warps copy a tile's raw bytes into
// the upper half of its stage (raw barrier), the other two convert them in
// place to the 16-bit layout and mark the tile full (sm90_load_raw_fp8,
// sm90_convert_fp8); key tiles are 64 keys in 5 stages, and Q has one
// buffer (shared memory: 32 + 5 x 32 + 16 KiB + tables).  H100, same-run
// A/B (64 keys in 4 stages, two Q buffers then), fp8 prefill eager us,
// attention_kernel -> this: causal 16x1024 781-792 -> 379.5-379.9, 4x4096
// 2607-2620 -> 1062-1081, 1x16384 9910-9951 -> 3873-3908 (a bf16 cache in
// the same run: 314-317 / 896-990 / 3549-3650).
//
// Persistent: one CTA per SM (sm90_max_ctas()), each running a sequence of
// units (unit = item x KV head) taken from the builder's claim order
// (AttnParams::units; see the unit ring in the kernel).
//
// Warp-specialised: CTA = 3 warpgroups (384 threads).
//  - Warpgroup 2 (warps 8..11, the producer) keeps 56 registers per thread.
//    It walks the CTA's units: it claims them and fills the unit ring (its
//    last warp alone where that warp has no K / V rows to copy), copies
//    each unit's Q into one of two Q buffers (one: head size 256, fp8
//    caches; TMA boxes through the Q map
//    when G divides 128, else cp.async; see load_q) and the unit's K / V
//    tiles into a ring of kStages buffers, running ahead of the consumers as
//    far as the buffers allow.  K / V move in 16-key segments: a segment of
//    16 valid keys in one cache block (or 16 consecutive rows of dense K / V)
//    is one TMA box per 64 columns (Sm90KvMaps); the rest (a unit's last
//    keys, block sizes that are not multiples of 16, layouts TMA cannot
//    take) goes row by row with cp.async.
//  - Warpgroups 0 and 1 (the consumers, 224 registers per thread) only
//    multiply and run the softmax: warpgroup g owns rows [64 g, 64 g + 64) of
//    the unit's BM = 128 query rows, warp w (0..7) rows [16 w, 16 w + 16),
//    which is attention_kernel's row split with one m16 tile per warp, so
//    the softmax and epilogue code is shared.  Per tile t a warpgroup
//      issues S_t = Q K_t^T (wgmma m64nBNk16, Q from registers -- loaded
//        once per unit with ldmatrix -- and K from shared memory),
//      issues O += P_{t-1} V_{t-1} (m64nHSk16, P from registers, V MN-major),
//      waits for S_t and runs scale / soft-cap / ALiBi / masks / softmax on it
//        while the P V product is still on the tensor cores,
//      waits for P V (then buffer t - 1 is released to the producer),
//      rescales O when the row maximum grew, packs P_t.
//    After a unit's last softmax a warpgroup loads the next unit's Q
//    fragments and issues, in one turn, this unit's last P V and the next
//    unit's first S product, which runs under this unit's epilogue.
//    The two warpgroups take turns issuing their products (pingpong: named
//    barriers 3 and 4, warpgroup 0 first), so that one's softmax runs while
//    the tensor cores work on the other's products; every issue point above
//    is a turn, the same number per unit in both warpgroups.
// Hand-offs are mbarriers (wgmma.cuh): per K / V buffer `full` (the
// producer's 128 threads arrive when their cp.async copies have landed, and
// the TMA boxes count their bytes; rows copied by cp.async are written
// through the generic proxy, so a consumer fences the proxies after the
// wait on a tile that may hold them) and `empty` (the 8 consumer warps arrive
// when their products are done with it); per Q buffer `qfull` (copies
// landed, the unit's ring slot written) and `qempty` (each of the 256
// consumer threads arrives as soon as it has loaded the unit's Q fragments
// into registers, at the end of the previous unit's key loop, so that the
// Q of the unit after next can come while this one runs; head size 256:
// one buffer, see above).  Final rows
// leave through each warp's own staging rows as 16-byte stores.
//
// Shared memory (1024-byte aligned, 128-byte swizzle; see wgmma.cuh):
//   kQBufs x Q [HS / 64][BM][64], kStages x (K [HS / 64][BN][64], V [HS / 64][BN][64]),
//   8 x output staging [kOutCols / 64][8][64] (one per consumer warp), the
//   mbarriers, 16 unit records.
// HS = 128: 64 + 3 x 48 + 16 KiB + 1.6 KiB (+1 KiB alignment slack) = 226.6 KiB,
// HS = 256: 64 + 4 x 32 + 16 KiB + 1.6 KiB (+1 KiB) = 210.6 KiB; one CTA per SM.
#pragma once

#include <cuda.h>  // CUtensorMap

#include "attention_item.cuh"
#include "softmax.cuh"
#include "wgmma.cuh"

namespace vattn {
namespace kern {

// One unit's record in the CTA's ring (shared memory): the item and its
// request as stored by the builder, then the fields derived from them.
// kvh < 0 / ntiles == 0: no such unit (the CTA's list has ended).  A real
// unit has ntiles >= 1: a unit without keys runs one tile with every key
// masked (its rows still get their zero output and -inf LSE), so each unit
// passes at least one tile through the pipeline.
struct UnitSlot {
  AttnItem it;
  AttnReq rq;
  int kvh, qpos0, kstart, kend, ntiles;
  // First tile whose rows may have come by cp.async (generic proxy), so the
  // consumers fence before wgmma reads them (async proxy): 0 when any full
  // tile can (no TMA, or 16-key segments that cross cache blocks), else the
  // last tile (its rows past the keys are zero-filled by cp.async).
  int fence_from;
  int t0, x0;  // the item's q_row0 / G and q_row0 % G (RowMap)
};
constexpr int kUnitRing = 16;    // slots: see the unit ring in the kernel
// kSched: the scheduler's ready and started mbarriers, kSchedBars of each;
// unit u uses barrier u % kSchedBars and waits for parity (u / kSchedBars) & 1
// (the kernel's argument at the waits needs kSchedBars == kStaticRounds).
constexpr int kSchedBars = 8;
constexpr int kStaticRounds = 8;  // list positions dealt before the counter takes over
// The ring's setup takes the positions of units 0 .. 7 without the counter
// (claims start at unit 7's ring step): fewer static rounds would deal
// positions the counter also hands out (H100, 2 rounds: every prefill shape
// 15-20% slower, each such unit computed twice).  More rounds (32: all of
// 16x1024 static) measured slower on long and short shapes (1x16384 573-581
// against 607-624 TFLOP/s, 32x512 275-279 against 290-291).
static_assert(kStaticRounds >= 8, "units 0 .. 7 take static positions in the ring's setup");

// FP8: the kernel's fp8-cache instance (head size 128): one more mbarrier
// per stage, `raw` (see the producer's conversion).
template <int HS, bool FP8 = false>
struct Sm90Shape {
  static_assert(HS == 64 || HS == 128 || HS == 256, "head size 64, 128 or 256");
  static_assert(!FP8 || HS == 128, "fp8 caches at head size 128 (one 128-byte TMA box per key row)");
  // Key tile: 96 keys at head size 128 (3 K / V buffers and 2 Q buffers fill
  // shared memory), 128 at 64 in 5 buffers (201 KB with 2 Q buffers; H200,
  // same-run A/B, eager us, 3 rounds, 3 -> 4 -> 5 stages: causal 16x1024
  // 227.9-228.2 -> 227.1-227.6 -> 225.0-225.4, 32x512 153.8-154.3 -> 153.2-
  // 153.7 -> 152.8-153.2, 4x4096 673.0-675.9 -> 674.0-675.4 -> 668.9-670.3,
  // 8x2000 367.2-367.7 -> 367.1-367.4 -> 363.7-364.2; 6 do not fit).
  // fp8: 64 keys in 5 buffers, so that three are free for tiles being
  // copied and converted while the consumers hold two (H200, same-run A/B,
  // fp8 prefill eager us, 96 keys x 3 -> 64 x 4: see docs/benchmarks.md),
  // and one Q buffer, which pays for the fifth:
  // Q lives in registers, so the consumers free its buffer as soon as they
  // have loaded it, at the unit's start, and the producer refills it after
  // the next unit's first tile, as at head size 256.  H200, same-run A/B,
  // eager us, 2 rounds, two Q buffers and 4 stages -> one and 5 (one and 4):
  // causal 16x1024 340.1-341.3 -> 333.7-334.5 (342.8), 32x512 218.4-220.0
  // -> 212.1 (221.2-221.6), 4x4096 1029.7-1040.9 -> 1024.6-1029.1
  // (1030.1-1030.2), 1x16384 3987-4031 -> 3983-4000 (3995-3997), e5m2
  // 8x2000 557.4-559.6 -> 547.4-551.9 (559.1-560.7).
  // Head size 256: O takes 128 registers per consumer thread, so Q stays in
  // shared memory (the S product reads it by descriptor; in registers it
  // would take 64 more), in one buffer, and key tiles are 48 keys in 3
  // stages (16-bit caches; 208 KB with Q).  The second loader warp then
  // owns rows 32..47 only: its upper half-warp counts as a TMA segment
  // (nothing to copy; see load_tile).  Before that fix, that warp walked
  // its 32-row cp.async loop on every tile and 48 x 3 ran 1.3-1.4x slower
  // than 32 x 4 (H100 sessions 29 / 30, H200 session 36), the consumers
  // waiting for full tiles (28.5% of stall samples, against 8.5%).  H200,
  // same-run A/B (scripts/gpu-ab, eager us, 2 rounds, causal), 32 x 4 ->
  // 48 x 3 with P V before S (see the key loop): 32x512 388.7-389.1 ->
  // 380.1-380.7, 16x1024 649.2-649.8 -> 574.7-575.3, 4x4096 2285-2352 ->
  // 1760-2034, 1x16384 9147-9155 -> 7452-7467; 64 x 2 with P V before S:
  // 412 / 665 / 2204-2241 / 8625-8629 (docs/benchmarks.md, "H200, session
  // 37").
  static constexpr bool kQSmem = HS > 128;
  static constexpr int kQBufs = kQSmem || FP8 ? 1 : 2;
  static constexpr int BM = 128, BN = HS == 64 ? 128 : HS == 256 ? (FP8 ? 32 : 48) : FP8 ? 64 : 96,
                       kStages = FP8 || HS == 64 ? 5 : 3;
  static constexpr int kConsumers = 256, kProducers = 128, kThreads = kConsumers + kProducers;
  // kSched: the producer's last warp copies no K / V rows (BN <= 96 keys,
  // 16-bit caches), so it is the scheduler: it claims and prepares the units
  // alone (see the unit ring in the kernel) and copies nothing.
  static constexpr bool kSched = !FP8 && BN <= 96;
  // Producer threads that copy (arrive on full, on qfull, and on raw for
  // fp8): all of them; for kSched the first three warps; for fp8 the first
  // two (the other two convert and arrive on full).
  static constexpr int kLoaders = FP8 ? 64 : kSched ? 96 : kProducers;
  // Registers per thread after the hand-over: 56 x 128 + 224 x 256 = 384 x 168
  // (what the CTA gets at launch with __launch_bounds__(384, 1)).  fp8 gives
  // the producer 72 (consumers 216): its converters spilled 48-76 bytes at 56
  // and spill none at 72, and the consumers' key loop is the same 1292
  // instructions at 216 (ptxas, sm_90a); 0.2-0.7% faster on the H200
  // (docs/benchmarks.md, "H200, session 40").
  static constexpr int kProducerRegs = FP8 ? 72 : 56, kConsumerRegs = FP8 ? 216 : 224;
  static_assert(kProducerRegs * kProducers + kConsumerRegs * kConsumers <= 168 * kThreads, "register split");
  static constexpr int kQBytes = BM * HS * 2;     // 16-bit elements
  static constexpr int kTileBytes = BN * HS * 2;  // one K (or V) tile
  // full / empty per stage, qfull / qempty per Q buffer (+ raw per stage:
  // fp8; + kSchedBars `ready` and kSchedBars `started`: kSched)
  static constexpr int kBars = (FP8 ? 3 : 2) * kStages + 2 * kQBufs + (kSched ? 2 * kSchedBars : 0);
  static constexpr int kTableBytes = kBars * 8 + kUnitRing * static_cast<int>(sizeof(UnitSlot));
  // Output staging: 8 rows of kOutCols 16-bit elements per consumer warp
  // (head size 256 leaves in two column halves).
  static constexpr int kOutCols = HS > 128 ? 128 : HS;
  static constexpr int kOutBytes = (kConsumers / 32) * 8 * kOutCols * 2;
  static constexpr size_t smem_bytes() {
    return 1024 + static_cast<size_t>(kQBufs) * kQBytes + static_cast<size_t>(kStages) * 2 * kTileBytes +
           kOutBytes + kTableBytes;
  }
  // Items have attention_rows_per_tile() rows: BM where the plan was built
  // for this kernel, attention_kernel's BM (<= BM) otherwise.
  static_assert(BM >= AttnShape<HS>::BM && BM == kAttnMaxItemRows, "an item's rows fit a unit");
  static_assert(kOutBytes >= kMergeScratchFloats * 4, "merge scratch");
  static_assert(kTileBytes % 1024 == 0, "swizzled tiles stay 1024-byte aligned");
};
// Shared memory per CTA: 64 bytes stay for static shared variables.
static_assert(Sm90Shape<64>::smem_bytes() <= 227 * 1024 - 64, "shared memory at head size 64");
static_assert(Sm90Shape<128>::smem_bytes() <= 227 * 1024 - 64, "shared memory at head size 128");
static_assert(Sm90Shape<128, true>::smem_bytes() <= 227 * 1024 - 64, "shared memory at head size 128, fp8");
static_assert(Sm90Shape<256>::smem_bytes() <= 227 * 1024 - 64, "shared memory at head size 256");

// Byte offset of 16-byte chunk ch of row r in a swizzled [HS / 64][R][64] tile.
template <int R>
__device__ __forceinline__ uint32_t swz_chunk(int r, int ch) {
  return static_cast<uint32_t>((ch >> 3) * R * 128 + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

// Tensor maps of K and V for the producer's TMA copies: 4-d [blocks]
// [block_size][kv heads][head size] for a paged cache, [1][rows][kv heads]
// [head size] for dense K / V (any strides that are multiples of 16 bytes),
// box = 16 keys x 64 elements of one head, 128-byte swizzle (the layout
// wgmma reads).  seg_rows: the extent of the box's key dimension (block
// size, or rows).  use == 0: every row is copied with cp.async (block sizes
// that are not multiples of 16, strides or addresses TMA cannot take, no
// driver entry point, or VATTN_CUDA_SM90_TMA=0).
// q (the prefill kernel's, sm90_q_map; q_use == 0: none): Q as [1][tokens]
// [heads][head size], box = 64 elements x G heads x (BM / G) tokens: a
// unit's whole row range in one box per 64 columns, rows in the order of
// its Q buffer (row r = token r / G, head r % G) when the item starts at a
// token's first head (q_row0 % G == 0).
struct Sm90KvMaps {
  CUtensorMap k, v, q;
  int32_t use, seg_rows, q_use;
};
// Host (attention.cu): fills *m for p; m->use = 0 when TMA cannot serve p.
// elem_bytes 2: 16-bit elements, boxes of [16 rows][64]; 1 (the decode
// kernel's fp8 caches): bytes, boxes of [16 rows][128].  l2_promo: the L2
// fetch size of a box row, 128 or 256 bytes.
void sm90_kv_maps(const AttnParams &p, int head_size, Sm90KvMaps *m, int elem_bytes = 2, int l2_promo = 128);
// Host (attention.cu): the L2 promotion (128 or 256 bytes) of the decode
// kernel's K / V boxes on the current device, for key rows of row_bytes.
int sm90_decode_l2_promo(int row_bytes);
// Tiles a warp of the fp8 head-size-128 TMA decode keeps in flight ahead of
// the one it computes (of its three stages): 1 where the memory bus is at
// most the H100's 5120 bits, else 2 (attention.cu says what was measured).
// VATTN_CUDA_DECODE_FP8_AHEAD=1 or 2 forces one (A/Bs).
int decode_fp8_ahead();
// The 16-bit head-size-128 TMA decode's lookahead (AttnParams::
// dec_one_ahead_tiles / dec_sms): *tiles = 32 and *sms = the SM count where
// the memory bus is wider than the H100's 5120 bits, else *tiles = 0 (two
// ahead for every item; attention.cu says what was measured).
// VATTN_CUDA_DECODE_AHEAD16=1 forces one ahead for every item, 2 two.
void decode_16bit_ahead(int32_t *tiles, int32_t *sms);
// Host: m->q for items of bm rows (m->q_use = 0 when TMA cannot serve Q:
// G does not divide bm, strides or addresses, VATTN_CUDA_SM90_TMA=0).
void sm90_q_map(const AttnParams &p, int head_size, int bm, Sm90KvMaps *m);

#if VATTN_SM90A
// ---- the producer's fp8 path (head size 128; the kernel below).  A K / V
// tile's raw bytes, [BN rows][128 bytes] with chunk c of row r at c ^ (r %
// 8) (TMA's 128-byte swizzle; cp.async rows are placed the same way), land
// on the stage's raw barrier in the second column block of its K (and V)
// buffer, where the 16-bit row r's dims 64 .. 127 go.  The producer then
// converts them in place and marks the tile full.

// sm90_load_raw_fp8: one row warp's part of a tile (kbuf: the stage's K
// buffer, V at + tile_bytes) -- the same segments and lanes as the 16-bit
// load_tile (lane l: key 32 pw + l, at cache block blk, slot slot; nv: the
// tile's keys); a 16-key segment is one box of 16 x 128 bytes.
template <int HS, int BN>
__device__ __forceinline__ void sm90_load_raw_fp8(const AttnParams &p, const Sm90KvMaps &maps, uint32_t kbuf,
                                                  int tile_bytes, uint32_t bar, int kvh, int blk, int slot, int nv,
                                                  int pw, int lane) {
  static_assert(HS == 128, "one 128-byte box per key row");
  const uint32_t dk = kbuf + BN * 128, dv = dk + tile_bytes;
  const int kr = pw * 32 + lane;
  const bool lead = maps.use != 0 && (lane & 15) == 0 && kr + 16 <= nv && slot + 16 <= maps.seg_rows;
  const unsigned tm = __ballot_sync(0xffffffffu, lead);  // bit 0 / 16: segment by TMA
  if (lead) {
    const int b = blk < 0 ? 0 : blk;
    mbar_expect_tx(bar, 2 * 16 * HS);
    tma_load_4d(dk + kr * 128, &maps.k, 0, kvh, slot, b, bar);
    tma_load_4d(dv + kr * 128, &maps.v, 0, kvh, slot, b, bar);
  }
  if (tm == 0x10001u) return;
  const int64_t b = blk < 0 ? 0 : blk;
  const int64_t ka =
      reinterpret_cast<int64_t>(p.k) + kvh * p.k_stride_head + b * p.k_stride_block + slot * p.k_stride_tok;
  const int64_t va =
      reinterpret_cast<int64_t>(p.v) + kvh * p.v_stride_head + b * p.v_stride_block + slot * p.v_stride_tok;
  constexpr int CH8 = HS / 16, LPR8 = 32 / CH8;  // 16-byte chunks per raw row, rows per step
  const int c8 = lane % CH8, r8 = lane / CH8;
#pragma unroll 4
  for (int i = 0; i < 32 / LPR8; ++i) {
    const int wr = r8 + LPR8 * i, r = pw * 32 + wr;
    const char *ks = reinterpret_cast<const char *>(__shfl_sync(0xffffffffu, ka, wr));
    const char *vs = reinterpret_cast<const char *>(__shfl_sync(0xffffffffu, va, wr));
    if ((tm >> (wr & 16)) & 1u) continue;
    const uint32_t o = swz_chunk<BN>(r, 8 + c8) - BN * 128;  // raw row r, chunk c8
    const int n = r < nv ? 16 : 0;  // zero-filled past the keys
    cp_async_16_s(dk + o, ks + c8 * 16, n);
    cp_async_16_s(dv + o, vs + c8 * 16, n);
  }
}

// sm90_convert_fp8: the landed raw K and V of a stage (kbuf: its K buffer,
// V at + tile_bytes) -> the 16-bit layout the products read, in place;
// converter thread i (0 .. NT - 1) takes rows i, i + NT, ... of the tile's
// 2 BN (K's, then V's).  A row's raw bytes lie where its dims 64 .. 127 go
// (column block 1), so the thread reads all 8 raw chunks of the row before
// it writes the 16 converted ones.  One chunk read and converted at a time
// ordered each next load after the stores (H200, same-run A/B, fp8 prefill
// eager us, one chunk -> four chunks read first: causal 16x1024
// 404.8-408.2 -> 374.6-374.8, 4x4096 1245.7-1249.2 -> 1073.0-1076.0,
// 1x16384 4629-4639 -> 3997, e5m2 8x2000 663.6-664.6 -> 590.7-591.8; all
// eight measured within 1% of four).  A quarter warp's 8 rows put a chunk
// in 8 different bank groups.  Rows past the tile's keys were zero-filled:
// they become zeros (V rows must stay finite).  The proxy fence orders
// these generic writes before the products' reads and the stage's next
// boxes.
template <int CACHE, int BN, int NT>
__device__ __forceinline__ void sm90_convert_fp8(uint8_t *kbuf, int tile_bytes, int i) {
#pragma unroll 1
  for (int row = i; row < 2 * BN; row += NT) {
    uint8_t *const buf = kbuf + (row < BN ? 0 : tile_bytes);
    const int r = row < BN ? row : row - BN;
    uint4 raw[8];  // raw chunk c: dims 16 c .. + 15
#pragma unroll
    for (int c = 0; c < 8; ++c) raw[c] = *reinterpret_cast<const uint4 *>(buf + swz_chunk<BN>(r, 8 + c));
#pragma unroll
    for (int c = 0; c < 8; ++c) {  // -> 16-bit chunks 2 c, 2 c + 1
      uint4 lo, hi;
      fp8x4_to_h2<CACHE>(raw[c].x, lo.x, lo.y);
      fp8x4_to_h2<CACHE>(raw[c].y, lo.z, lo.w);
      fp8x4_to_h2<CACHE>(raw[c].z, hi.x, hi.y);
      fp8x4_to_h2<CACHE>(raw[c].w, hi.z, hi.w);
      *reinterpret_cast<uint4 *>(buf + swz_chunk<BN>(r, 2 * c)) = lo;
      *reinterpret_cast<uint4 *>(buf + swz_chunk<BN>(r, 2 * c + 1)) = hi;
    }
  }
  fence_proxy_async_if(true);
}
#endif  // VATTN_SM90A

template <class T, int CACHE, int HS>
__global__ void __launch_bounds__(384, 1)
    attention_sm90_kernel(const AttnParams p, const __grid_constant__ Sm90KvMaps maps) {
#if VATTN_SM90A
  constexpr bool kFp8 = CACHE != kCacheAuto;
  using S = Sm90Shape<HS, kFp8>;
  // The products' operand type: fp8 caches are converted to fp16, exactly
  // (Q to fp16 once per unit: exact for |q| in [2^-14, 65504], as in the
  // decode kernel; P in fp16 is at least as precise as in bf16).
  using MT = typename std::conditional<kFp8, __half, T>::type;
  constexpr int BM = S::BM, BN = S::BN, ST = S::kStages;
  constexpr int DF = HS / 8;  // 8-wide output fragments
  constexpr int NF = BN / 8;  // 8-wide score fragments
  constexpr int CH = HS / 8;  // 16-byte chunks per row
  constexpr int QB = S::kQBufs;  // unit u's Q: buffer u % QB, its (u / QB)-th fill
  constexpr int kRingWarp = S::kConsumers / 32;  // the producer's first warp

  const int nkv = p.num_kv_heads;
  const int n_units = *p.num_items * nkv;    // list positions [0, n_units); < 2^31
  const int n_table = *p.first_item * nkv;   // positions with an entry in p.units

  extern __shared__ uint8_t smem_raw[];
  // Offset (not a round trip through an integer) so the compiler keeps the
  // shared address space: plain LDS / STS for the tables.
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t *sQ = smem;                   // Q buffer of unit u: q_buf(u)
  uint8_t *sKV = sQ + QB * S::kQBytes;  // stage s: K at sKV + 2 s kTileBytes, V after it
  uint8_t *sOut = sKV + ST * 2 * S::kTileBytes;  // consumer warp w: [kOutCols / 64][8][64] at w * 8 * kOutCols * 2
  uint64_t *bars = reinterpret_cast<uint64_t *>(sOut + S::kOutBytes);
  UnitSlot *ring = reinterpret_cast<UnitSlot *>(bars + S::kBars);
  const uint32_t aKV = smem_u32(sKV), aBar = smem_u32(bars);
  auto q_buf = [&](int u) { return sQ + (u % QB) * S::kQBytes; };
  // mbarrier addresses: full[s], empty[s], qfull[b], qempty[b], raw[s] (fp8).
  auto bar_full = [&](int s) { return aBar + 8u * s; };
  auto bar_empty = [&](int s) { return aBar + 8u * (ST + s); };
  auto bar_qfull = [&](int b) { return aBar + 8u * (2 * ST + b); };
  auto bar_qempty = [&](int b) { return aBar + 8u * (2 * ST + QB + b); };
  auto bar_raw = [&](int s) { return aBar + 8u * (2 * ST + 2 * QB + s); };
  // kSched (no raw): ready[unit % kSchedBars], started[unit % kSchedBars]
  auto bar_ready = [&](int u) { return aBar + 8u * (2 * ST + 2 * QB + u % kSchedBars); };
  auto bar_started = [&](int u) { return aBar + 8u * (2 * ST + 2 * QB + kSchedBars + u % kSchedBars); };
  auto sched_parity = [](int u) { return static_cast<uint32_t>((u / kSchedBars) & 1); };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int bs = p.block_size;
  const float inv_g = 1.f / static_cast<float>(p.group);  // RowMap's
  const int bs_shift = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;

  // ---- the unit ring.  The CTA's k-th unit comes from list position
  // pos_k: rounds k < kStaticRounds are dealt in snake order (CTA c takes
  // position c of even rounds, gridDim.x - 1 - c of odd ones), later units
  // are claimed from the launch's counter, so the CTAs that finish first
  // take more.  Positions only grow, so the first one past the list ends it.
  // Where the producer has a warp without K / V rows to copy (Sm90Shape::
  // kSched: head sizes 128 and 256 with 16-bit caches), that warp, the
  // scheduler, fills the ring alone, claiming units 2 ahead (at the
  // producer, below).  Otherwise (head size 64, fp8 caches) lanes 0..7 of
  // the producer's first warp run a five-stage pipeline, one stage per unit
  // the producer starts, which claims units 7 ahead; at the start of unit u
  // (fp8 caches: once unit u's first tile and Q are issued) they
  //   store the item of unit u + 4 and the request of unit u + 3 (loaded at
  //     the previous unit start) and derive unit u + 3's fields,
  //   load the item of unit u + 5 (its unit value from the previous start)
  //     and the request of unit u + 4,
  //   load the unit value of unit u + 6 (claimed at the previous start) and
  //     claim unit u + 7.
  // Each load has a whole unit (>= one tile) to land.  Units u .. u + 3 are
  // complete while the producer is in unit u (its key offsets read at most
  // one unit ahead; fp8, before the step: u .. u + 2, and the first tile
  // and Q need slot u only).  The consumers read unit u's slot once qfull
  // of unit u completes, last when unit u starts.  The slots written at the
  // producer's unit u start (u + 3 .. u + 5, i.e. u - 13 .. u - 11 mod 16)
  // are past the consumers: the producer passed qempty of unit u (issuing
  // unit u's Q in unit u - 1), so both consumer warpgroups have loaded unit
  // u - 2's Q, at the end of unit u - 3's key loop, and read nothing before
  // unit u - 2's slot.  (One Q buffer, fp8 caches: the producer passed
  // qempty of unit u - 1, in unit u - 1, which completes once the consumers
  // have loaded unit u - 2's Q: the same bound; the step, after unit u's
  // Q, has passed qempty of unit u too.  One Q buffer, head size
  // 256: qempty of unit u completes once unit u - 1's last S product has
  // landed, so they read nothing before unit u - 1's slot.)
  const int C = gridDim.x, cta = blockIdx.x;
  auto static_pos = [&](int k) { return k * C + ((k & 1) ? C - 1 - cta : cta); };
  auto unit_at = [&](int pos) {  // -1: past the list
    return pos >= n_units ? -1 : pos < n_table ? __ldg(p.units + pos) : pos;
  };
  auto slot_words = [&](int r, bool req) {
    UnitSlot &s = ring[r % kUnitRing];
    return req ? reinterpret_cast<int32_t *>(&s.rq) : reinterpret_cast<int32_t *>(&s.it);
  };
  auto item_word = [&](int v, int w) {  // v: a unit value >= 0
    return __ldg(reinterpret_cast<const int32_t *>(p.items + v / nkv) + w);
  };
  auto req_word = [&](int r, int w) {
    return __ldg(reinterpret_cast<const int32_t *>(p.reqs + ring[r % kUnitRing].it.req) + w);
  };
  auto derive = [&](int r) {  // the slot's kvh, item and request are in place
    UnitSlot &s = ring[r % kUnitRing];
    if (s.kvh < 0) {
      s.ntiles = 0;
      return;
    }
    const ItemKeys ik = item_keys(p, s.it, s.rq, s.rq.causal != 0 && p.allow_causal != 0, BN);
    s.qpos0 = ik.qpos0;
    s.kstart = ik.kstart;
    s.kend = ik.kend;
    s.ntiles = ik.ntiles > 1 ? ik.ntiles : 1;
    s.t0 = s.it.q_row0 / p.group;
    s.x0 = s.it.q_row0 - s.t0 * p.group;
    // A full tile is all TMA boxes when TMA is on and its 16-key segments
    // each lie in one cache block (the producer's `lead` test: block size
    // and key start multiples of 16; dense K / V rows are consecutive).
    const bool full_tma = maps.use != 0 && (!p.paged || ((bs & 15) == 0 && (ik.kstart & 15) == 0));
    // fp8: the producer writes every tile's 16-bit rows itself and fences
    // before it marks the tile full (sm90_convert_fp8): no consumer fences.
    if constexpr (kFp8)
      s.fence_from = s.ntiles;
    else
      s.fence_from = full_tma ? s.ntiles - 1 : 0;
  };

  // fp8: per stage, 1 when its raw barrier's latest completion ends the
  // CTA's tiles (the loaders' termination), else 0.  Written only while
  // the stage is free and read after its raw barrier completes, so reads
  // and writes never overlap.
  __shared__ int s_fp8_stop[ST];
  // fp8: the producer's first two warps copy (S::kLoaders threads: the
  // qfull and raw arrivals), the other two convert (the full arrivals).
  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(bar_full(s), kFp8 ? S::kProducers - S::kLoaders : S::kLoaders);
      mbar_init(bar_empty(s), S::kConsumers / 32);
    }
    for (int b = 0; b < QB; ++b) {
      mbar_init(bar_qfull(b), S::kLoaders + 1);  // + the ring slot's release
      mbar_init(bar_qempty(b), S::kConsumers);  // every consumer thread: its Q fragments
    }
    if constexpr (S::kSched) {
      for (int r = 0; r < kSchedBars; ++r) {
        mbar_init(bar_ready(r), 8);  // the slot's 8 writer lanes (one word each)
        mbar_init(bar_started(r), 1);
      }
    }
    if constexpr (kFp8) {
      for (int s = 0; s < ST; ++s) {
        mbar_init(bar_raw(s), S::kLoaders);
        s_fp8_stop[s] = 0;
      }
    }
  }
  // Lanes 0..7 of the ring warp: wi / wr the next item / request word;
  // lane 0: wv the next unit value, wp the next list position (a claim
  // from the counter: its raw value until the next unit start).
  int wi = 0, wr = 0, wv = -1, wp = 0;
  if (!S::kSched && warp == kRingWarp) {
    // The state after unit 0's start: units 0 .. 3 derived, units 4 and 5
    // with item and kvh (5's also in wi), unit 4's request (also in wr),
    // unit 6's value in wv and unit 7's position in wp.
    const int v = lane < 6 ? unit_at(static_pos(lane)) : -1;  // units 0 .. 5
    if (lane < 6) ring[lane].kvh = v < 0 ? -1 : v % nkv;
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // 48 item words over the warp
      const int e = lane + 32 * i;
      const int ve = __shfl_sync(0xffffffffu, v, min(e / 8, 5));
      if (e < 6 * 8 && ve >= 0) slot_words(e / 8, false)[e % 8] = item_word(ve, e % 8);
    }
    if (lane == 0) {
      wv = unit_at(static_pos(6));
      wp = static_pos(7);
    }
    __syncwarp();
    if (lane < 8) wi = slot_words(5, false)[lane];
    for (int e = lane; e < 5 * 8; e += 32)
      if (ring[e / 8].kvh >= 0) slot_words(e / 8, true)[e % 8] = req_word(e / 8, e % 8);
    __syncwarp();
    if (lane < 8) wr = slot_words(4, true)[lane];
    if (lane < 4) derive(lane);
  }
  __syncthreads();  // the barriers and the ring's first units

  if (warp >= kRingWarp) {
    // ================= producer =================
    setmaxnreg_dec<S::kProducerRegs>();
    const int pw = warp - kRingWarp;  // 0..3
    auto ring_step = [&](int u) {     // lanes 0..7 of the ring warp, at unit u >= 1
      slot_words(u + 4, false)[lane] = wi;
      slot_words(u + 3, true)[lane] = wr;
      __syncwarp(0xffu);
      if (lane == 0) derive(u + 3);
      const int v = __shfl_sync(0xffu, wv, 0);  // unit u + 5
      if (lane == 0) ring[(u + 5) % kUnitRing].kvh = v < 0 ? -1 : v % nkv;
      if (v >= 0) wi = item_word(v, lane);
      if (ring[(u + 4) % kUnitRing].kvh >= 0) wr = req_word(u + 4, lane);
      if (lane == 0) {
        // A claim's value is first read here, a unit after the atomic went
        // out, so its round trip to L2 does not hold the producer at the
        // unit start (with atomicAdd it did: ptxas made it a warp-aggregated
        // atomic whose result is shuffled at once; the producer's ring step
        // and barrier took about 2000 cycles per unit, bench/sm90_stamps.py).
        // H100, same-run A/B, eager us: causal 32x512 222.2-222.6 ->
        // 217.1-219.3, head size 64 16x1024 242.0-242.3 -> 239.2-239.6,
        // 16x1024 313.8-317.0 -> 313.2-314.4, 8x2000 the same.
        // Unit u + 6's position was a claim when its k = u + 6 >=
        // kStaticRounds (if the list had ended then, wp stays past it).
        if (u + 6 >= kStaticRounds) wp += kStaticRounds * C;
        wv = unit_at(wp);  // unit u + 6
        const int k = u + 7;
        if (wp < n_units) wp = k < kStaticRounds ? static_pos(k) : atom_inc_relaxed_gpu(p.unit_ctr);
      }
    };

    // kSched: the scheduler (the producer's last warp, which copies nothing)
    // writes unit k's slot and completes the slot's ready barrier; loaders
    // wait on it before they read the slot (no ring_step, no producer
    // barrier per unit).  Units below kStaticRounds take their static
    // positions at once, four at a time (lanes 8 j .. 8 j + 7: unit k + j);
    // a later unit k is claimed once the loaders have started unit k -
    // kClaimLead, then its unit value, item and request are loaded one after
    // the other and its fields derived.  This chain (an atomic and three
    // dependent loads) has the loaders' unit k - 2 and a tile of unit k - 1
    // to complete (they read slot k at unit k - 1's first tile), and it
    // holds up no copy.  The ring pipeline above claims 7 units ahead, so
    // when the list is used up each CTA still holds up to 7 units, whose
    // lengths differ: the CTAs' last units ended 2-3% of the launch apart on
    // average (per-CTA end times, H100, docs/benchmarks.md, session 21).
    // H100, same-run A/B, eager us, 3 rounds, ring pipeline -> lead 3 ->
    // lead 2: causal 16x1024 303.5-305.7 -> 298.9-300.1 -> 297.6-298.8,
    // 32x512 209.9-210.8 -> 206.8-207.2 -> 205.7-206.8, 8x2000 470.6-473.8
    // -> 461.4-463.8 -> 459.4-460.6, head size 256 16x1024 714.0-722.7 ->
    // 685.5-689.5 -> 680.2-684.8.  Fewer static rounds (4, 2) measured the
    // same as 8.  Slot k overwrites unit k - 16's, which no one reads any
    // more: the loaders have started unit k - kClaimLead, so the consumers
    // have loaded unit k - kClaimLead - 2's Q (the argument above).  Both
    // hand-offs are mbarriers (release / acquire): ready[unit % 8], which
    // each of the slot's 8 writer lanes arrives on after its own stores,
    // and started[unit % 8], which the producer's first thread arrives on
    // at each unit start.  With ready completed by lane 0 alone after a
    // __syncwarp, compute-sanitizer's racecheck reported the other lanes'
    // request words against the loaders' reads (20 hazards on the head-size
    // 256 test; none with the 8 arrivals, H200).  Same-run A/B against a
    // polled shared-memory counter for started[] and lane 0's ready, eager
    // us, 3 rounds, H200: causal 16x1024 291.2-291.4 -> 291.8-291.9, 32x512
    // 194.9-195.4 -> 196.0, 8x2000 464.4-464.9 -> 465.2-465.3, head size 256
    // 664.2-664.8 -> 666.3-667.5.
    // Re-arms the counters for the next launch: the last CTA to leave resets
    // them.  Called by the thread that made the CTA's claims, after its last
    // one (every claim of a CTA precedes its exit count: same thread, fence).
    auto rearm_counters = [&]() {
      __threadfence();
      if (atomicAdd(p.unit_ctr + 1, 1) == static_cast<int>(gridDim.x) - 1) {
        atomicExch(p.unit_ctr, 0);
        atomicExch(p.unit_ctr + 1, 0);
      }
    };
    constexpr int kClaimLead = 2;
    static_assert(kStaticRounds == kSchedBars && kSchedBars == 8 && kClaimLead == 2,
                  "the parities of ready[] and started[]");
    // ready[u % 8]: the loaders wait for slot u in unit u - 1 at the latest
    // (or in unit 0 for u < kStaticRounds), when the scheduler has written
    // slot u + 1 at most (kStaticRounds - 1 for u < kStaticRounds), so
    // unit u + 8's phase has not completed.
    auto wait_slot = [&](int u) {
      if constexpr (S::kSched) mbar_wait(bar_ready(u), sched_parity(u));
    };
    if constexpr (S::kSched) {
      if (pw == S::kLoaders / 32) {
        // ================= scheduler =================
        const int j = lane >> 3, wl = lane & 7;
        int ws = 0;  // the next unit start to wait for
        bool ended = false;
#pragma unroll 1
        for (int k = 0; !ended;) {
          const int nb = k < kStaticRounds ? min(4, kStaticRounds - k) : 1;
          // Every unit's start is waited for, in order, so started[i % 8]
          // has completed unit i - 8's phase; the loaders wait for slot k
          // in unit k - 1, so they have started unit k - 1 <= i + 7 at most
          // (the first wait, at k = kStaticRounds, is for unit 0): unit i +
          // 8's phase has not completed, and a parity names unit i's.
          if (k >= kStaticRounds)
            for (; ws <= k - kClaimLead; ++ws) mbar_wait(bar_started(ws), sched_parity(ws));
          const int kk = k + j;
          const bool mine = j < nb;
          int pos = 0;
          if (mine && wl == 0)
            pos = kk < kStaticRounds ? static_pos(kk) : kStaticRounds * C + atom_inc_relaxed_gpu(p.unit_ctr);
          pos = __shfl_sync(0xffffffffu, pos, lane & 24);
          const int v = mine ? unit_at(pos) : -1;
          if (mine && v >= 0) slot_words(kk, false)[wl] = item_word(v, wl);
          __syncwarp();
          if (mine && v >= 0) slot_words(kk, true)[wl] = req_word(kk, wl);
          __syncwarp();
          if (mine) {
            if (wl == 0) {
              ring[kk % kUnitRing].kvh = v < 0 ? -1 : v % nkv;
              derive(kk);
            }
            mbar_arrive(bar_ready(kk));
          }
          ended = __any_sync(0xffffffffu, mine && v < 0);  // the slot that ends the list went out
          k += nb;
        }
        if (lane == 0) rearm_counters();
        return;
      }
    }

    // Copies.  Q: warp pw copies rows [32 pw, 32 pw + 32) (and the row
    // groups kLoaders / 32 further on, where fewer warps copy).  K / V: the
    // warps with 32 pw < BN own rows [32 pw, 32 pw + 32) of a tile (the last
    // one's upper 16 lie past a 48-key tile), lane l key 32 pw + l, in two
    // 16-key segments (lanes 0..15, 16..31).  A segment of 16 valid keys in
    // one cache block goes by TMA (its first lane issues it); the other
    // rows by cp.async, zero-filled past the tile's keys.  A
    // cp.async step covers LPR rows of CH chunks, lane -> (row cr + LPR i,
    // chunk cc), so each row is read by CH consecutive lanes (coalesced);
    // row addresses are computed once by the row's lane and taken by shuffle.
    constexpr int LPR = 32 / CH;
    static_assert(BN % 16 == 0 && 32 % CH == 0, "producer copy split");
    const int cc = lane % CH, cr = lane / CH;
    const bool row_warp = pw * 32 < BN;

    // Q rows [32 rg, 32 rg + 32) of unit r (rows past num_rows zero: never
    // stored).  With a Q map and an item that starts at a token's first head,
    // the call for row group 0 takes the whole unit as HS / 64 TMA boxes on
    // the qfull barrier instead (its rows past num_rows then hold the next
    // tokens' queries, or zeros past the tensor: never stored either).  The
    // row-by-row copy took each producer warp about 330 instructions per
    // unit (Nsight Compute), issue slots the consumers' unit boundary needs.
    // H100, same-run A/B, eager us, 3 rounds, cp.async -> TMA: causal
    // 16x1024 308.4-310.5 -> 306.6-307.6, 32x512 212.1-213.6 -> 209.6-210.3,
    // head size 64 232.3-232.7 -> 229.0-229.4, head size 256 734.2-736.0 ->
    // 707.5-716.9, fp8 cache 368.1-369.3 -> 345.1-347.5, 8x2000 the same
    // (477.8-479.2 / 477.2-479.7).
    auto load_q = [&](int r, int rg) {
      const UnitSlot &s = ring[r % kUnitRing];
      if (maps.q_use != 0 && s.x0 == 0) {
        if (rg == 0 && lane == 0) {
          const uint32_t dq = smem_u32(q_buf(r)), bar = bar_qfull(r % QB);
          mbar_expect_tx(bar, S::kQBytes);
          const int tok0 = s.rq.q_start + s.t0, h0 = s.kvh * p.group;
#pragma unroll
          for (int cb = 0; cb < HS / 64; ++cb) tma_load_4d(dq + cb * BM * 128, &maps.q, cb * 64, h0, tok0, 0, bar);
        }
        return;
      }
      const RowMap rm = row_map_at(p, s.rq, s.kvh, s.t0, s.x0, inv_g);
      const int rows = s.it.num_rows;
      const T *row_q;
      {
        int64_t tok;
        int h;
        rm.of(32 * rg + lane, &tok, &h);
        row_q = static_cast<const T *>(p.q) + tok * p.q_stride_tok + h * p.q_stride_head;
      }
      const uint32_t dq = smem_u32(q_buf(r));
#pragma unroll 4
      for (int i = 0; i < 32 / LPR; ++i) {
        const int wr_ = cr + LPR * i, row = 32 * rg + wr_;
        const T *src = reinterpret_cast<const T *>(
            __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(row_q), wr_));
        cp_async_16_s(dq + swz_chunk<BM>(row, cc), row < rows ? src + cc * 8 : p.q, row < rows ? 16 : 0);
      }
    };

    // This lane's key of a tile: its cache block and slot (paged), or blk
    // = -1 and its row in slot (dense); masked keys: (0, 0), a valid row
    // never read (zero-filled).  nv: the tile's keys.  A segment goes by TMA
    // when its 16 keys are valid and consecutive in the map's key dimension
    // (slot + 16 <= seg_rows).
    struct TileKey {
      int blk, slot, nv;
    };
    // The key offsets walk the CTA's tiles one ahead of the copies: (ou, ot)
    // = unit and tile of the next tile to prepare; the unit's fields are
    // read from the ring at its first tile and kept in registers (load_tile
    // reads cu_kvh: it runs before the next tile_offsets moves to a new unit).
    int ou = 0, ot = 0;
    int cu_kstart = 0, cu_kend = 0, cu_ntiles = 0, cu_kv_start = 0, cu_kvh = 0;
    const int32_t *cu_bt = p.block_table;
    auto tile_offsets = [&](TileKey &tk) {
      if (ot == 0) {
        wait_slot(ou);
        const UnitSlot &s = ring[ou % kUnitRing];
        cu_ntiles = s.ntiles;
        cu_kstart = s.kstart;
        cu_kend = s.kend;
        cu_kvh = s.kvh;
        cu_kv_start = s.rq.kv_start;
        cu_bt = p.block_table + static_cast<int64_t>(s.rq.bt_row) * p.bt_stride;
      }
      tk.blk = tk.slot = 0;
      tk.nv = 0;
      if (cu_ntiles == 0) return;
      const int k0 = cu_kstart + ot * BN;
      tk.nv = min(max(cu_kend - k0, 0), BN);
      const int j = k0 + pw * 32 + lane;
      if (row_warp && j < k0 + tk.nv) {
        if (p.paged) {
          key_slot(p, cu_bt, bs_shift, j, &tk.blk, &tk.slot);
        } else {
          tk.blk = -1;
          tk.slot = cu_kv_start + j;
        }
      }
      if (++ot == cu_ntiles) {
        ++ou;
        ot = 0;
      }
    };
    // The tile of tk into stage st; completes on its full barrier (with
    // every producer thread's arrival after it).
    auto load_tile = [&](int st, const TileKey &tk) {
      if (!row_warp) return;
      const uint32_t dk = aKV + st * 2 * S::kTileBytes, dv = dk + S::kTileBytes;
      const int kr = pw * 32 + lane;  // this lane's row
      const bool lead = maps.use != 0 && (lane & 15) == 0 && kr + 16 <= tk.nv && tk.slot + 16 <= maps.seg_rows;
      // Bit 0 / 16: that segment goes by TMA, or (BN % 32 == 16, the last
      // row warp's upper half) lies past the tile: no cp.async rows either.
      const unsigned past = BN % 32 != 0 && pw * 32 + 16 >= BN ? 0x10000u : 0u;
      const unsigned tm = __ballot_sync(0xffffffffu, lead) | past;
      if (lead) {
        mbar_expect_tx(bar_full(st), 2 * 16 * HS * 2);
#pragma unroll
        for (int cb = 0; cb < HS / 64; ++cb) {
          const int blk = tk.blk < 0 ? 0 : tk.blk;
          tma_load_4d(dk + cb * BN * 128 + kr * 128, &maps.k, cb * 64, cu_kvh, tk.slot, blk, bar_full(st));
          tma_load_4d(dv + cb * BN * 128 + kr * 128, &maps.v, cb * 64, cu_kvh, tk.slot, blk, bar_full(st));
        }
      }
      if (tm == 0x10001u) return;
      // This lane's K and V row addresses.
      const int64_t b = tk.blk < 0 ? 0 : tk.blk;
      const int64_t ka = reinterpret_cast<int64_t>(p.k) +
                         (cu_kvh * p.k_stride_head + b * p.k_stride_block + tk.slot * p.k_stride_tok) * 2;
      const int64_t va = reinterpret_cast<int64_t>(p.v) +
                         (cu_kvh * p.v_stride_head + b * p.v_stride_block + tk.slot * p.v_stride_tok) * 2;
      static_assert(sizeof(T) == 2, "16-bit caches");
#pragma unroll 4
      for (int i = 0; i < 32 / LPR; ++i) {
        const int wr_ = cr + LPR * i, r = pw * 32 + wr_;
        const char *ks = reinterpret_cast<const char *>(__shfl_sync(0xffffffffu, ka, wr_));
        const char *vs = reinterpret_cast<const char *>(__shfl_sync(0xffffffffu, va, wr_));
        if ((tm >> (wr_ & 16)) & 1u) continue;
        const uint32_t o = swz_chunk<BN>(r, cc);
        const int n = r < tk.nv ? 16 : 0;
        cp_async_16_s(dk + o, ks + cc * 16, n);
        cp_async_16_s(dv + o, vs + cc * 16, n);
      }
    };

    // Q of unit u into buffer u % QB (last used by unit u - QB), and slot u
    // of the ring published with it.  Unit u + 1's Q goes out after unit u's
    // first tile, a unit ahead of its use: the consumers load it at the end
    // of unit u's key loop, and with it issued after unit u's last tile (a
    // few tiles before that on short units) they waited for it.
    // (Fewer loader warps than row groups -- fp8, kSched: a warp copies several.)
    auto issue_q = [&](int u) {
      mbar_wait(bar_qempty(u % QB), ((u / QB) & 1) ^ 1);
      wait_slot(u);
      if (ring[u % kUnitRing].ntiles > 0) {
        if constexpr (S::kLoaders < S::kProducers) {
#pragma unroll 1
          for (int rg = pw; rg < BM / 32; rg += S::kLoaders / 32) load_q(u, rg);
        } else {
          load_q(u, pw);
        }
      }
      mbar_arrive_cp_async(bar_qfull(u % QB));
      if (tid == S::kConsumers) mbar_arrive(bar_qfull(u % QB));  // publishes the ring (ring warp, lane 0)
    };
    // The Q issue in unit u, after its first tile.  Two Q buffers: unit u +
    // 1's Q (slot u + 1 is complete: units u .. u + 3 are).  One Q buffer
    // (head size 256, fp8 caches): unit u's Q, so that the first tile takes a
    // stage freed during unit u - 1's last key step, while the Q load waits
    // for the buffer (head size 256: for that step's S product; issued after
    // unit u - 1's last tile, it held the first tile back until then).
    // H200, same-run A/B, eager us, 2 rounds, head size 256, causal: 32x512
    // 379.5-379.9 -> 374.5-375.5, 16x1024 573.5-574.2 -> 571.6-573.2,
    // 1x16384 7519-7527 -> 7462-7515, 8x2000 940.6-944.0 -> 938.9.
    auto issue_q_in_unit = [&](int u) {
      if (QB == 2) issue_q(u + 1);
      else if (u > 0) issue_q(u);
    };
    // At the unit u that ends the CTA's list (its slot went out with unit u
    // - 1's Q; one Q buffer: it goes out here).
    auto issue_q_at_end = [&](int u) {
      if (QB == 1 && u > 0) issue_q(u);
    };
    if constexpr (kFp8) {
      if (pw >= S::kLoaders / 32) {
        // Converters: every tile of the CTA in order, as its raw bytes land
        // (the loaders' termination: a completion of the next tile's raw
        // barrier with its stop flag set).
        const int ci = tid - S::kConsumers - S::kLoaders;
#pragma unroll 1
        for (int k = 0;; ++k) {
          const int cs = k % ST;
          mbar_wait(bar_raw(cs), (k / ST) & 1);
          if (s_fp8_stop[cs]) break;
          sm90_convert_fp8<CACHE, BN, S::kProducers - S::kLoaders>(sKV + cs * 2 * S::kTileBytes, S::kTileBytes,
                                                                   ci);
          mbar_arrive(bar_full(cs));
        }
        return;
      }
    }
    // The unit loop: the loaders' (fp8) or every producer thread's.  Two
    // copies of it: with one loop and the fp8 steps under `if constexpr`,
    // ptxas spilled registers in the 16-bit instance's consumers.
    TileKey tk;
    tile_offsets(tk);
    int st = 0;
    uint32_t ph = 0;  // parity of the stage's current fill
    issue_q(0);
    if constexpr (kFp8) {
#pragma unroll 1
      for (int u = 0;; ++u) {
        const int nt = ring[u % kUnitRing].ntiles;
        if (nt == 0) {
          issue_q_at_end(u);
          break;
        }
#pragma unroll 1
        for (int t = 0; t < nt; ++t) {
          mbar_wait(bar_empty(st), ph ^ 1);
          // (A device function, not a lambda: lambdas that capture the
          // kernel's state made ptxas spill in the 16-bit instance.)
          sm90_load_raw_fp8<HS, BN>(p, maps, aKV + st * 2 * S::kTileBytes, S::kTileBytes, bar_raw(st), cu_kvh,
                                    tk.blk, tk.slot, tk.nv, pw, lane);
          mbar_arrive_cp_async(bar_raw(st));
          tile_offsets(tk);
          if (++st == ST) {
            st = 0;
            ph ^= 1;
          }
          if (t == 0) {
            issue_q_in_unit(u);
            // The ring step after the unit's first tile and Q, not before
            // them: the consumers wait for that tile at the unit boundary
            // (4.6% of their stall samples on 16x1024, ncu, H200), and slot
            // u + 1, the next unit's, was derived at step u - 2.  H200,
            // same-run A/B, eager us, 3 rounds: fp8 16x1024 331.5-332.6 ->
            // 317.5-318.6, 32x512 211.0-211.7 -> 203.2-204.1, 4x4096
            // 1019-1022 -> 1009-1012, e5m2 8x2000 545.7-546.7 -> 535.5-536.2,
            // 1x16384 3952-3992 -> 4005-4010 (the next call ran this kernel's
            // 1x16384 in 3878-3903).  Head size 64 keeps its ring step before
            // the first tile: after it ran 0.4-0.9% slower on 16x1024 / 32x512.
            if (u > 0) {
              if (warp == kRingWarp && lane < 8) ring_step(u);
              named_barrier_sync(1, S::kLoaders);  // the ring's new slots
            }
          }
        }
      }
      // Termination: stage st is free once the consumers are done with the
      // tile it held (whose raw phase completed before that); the next
      // completion of its raw barrier, by plain arrivals, carries its stop
      // flag.
      mbar_wait(bar_empty(st), ph ^ 1);
      if (tid == S::kConsumers) s_fp8_stop[st] = 1;
      __syncwarp();
      mbar_arrive(bar_raw(st));
    } else {
#pragma unroll 1
      for (int u = 0;; ++u) {
        if constexpr (S::kSched) {
          if (tid == S::kConsumers) mbar_arrive(bar_started(u));
        } else if (u > 0) {
          if (warp == kRingWarp && lane < 8) ring_step(u);
          named_barrier_sync(1, S::kProducers);  // the ring's new slots
        }
        const int nt = ring[u % kUnitRing].ntiles;
        if (nt == 0) {
          issue_q_at_end(u);
          break;
        }
#pragma unroll 1
        for (int t = 0; t < nt; ++t) {
          mbar_wait(bar_empty(st), ph ^ 1);
          load_tile(st, tk);
          mbar_arrive_cp_async(bar_full(st));
          tile_offsets(tk);  // the next tile's (past the last unit: nv = 0, unused)
          if (++st == ST) {
            st = 0;
            ph ^= 1;
          }
          if (t == 0) issue_q_in_unit(u);
        }
      }
    }
    cp_async_wait_all();
    if (!S::kSched && warp == kRingWarp && lane == 0) rearm_counters();
    return;
  }

  // ================= consumers (threads 0..255) =================
  setmaxnreg_inc<S::kConsumerRegs>();
  const int gq = lane >> 2, tq = lane & 3;
  ScoreCtx sc = score_ctx_of(p);

  // wgmma descriptors (start addresses advance in 16-byte units).
  // The descriptors differ in their low words only (start address, LBO) and
  // start addresses stay below 2^14 units (shared memory < 256 KiB), so the
  // offsets are 32-bit adds on the low word.
  const uint64_t descK0 = wgmma_desc(aKV, 16, 1024);
  const uint64_t descV0 = wgmma_desc(aKV + S::kTileBytes, BN * 128, 1024);
  const uint64_t desc_hi = descK0 & 0xFFFFFFFF00000000ull;
  const uint32_t dK0 = static_cast<uint32_t>(descK0), dV0 = static_cast<uint32_t>(descV0);
  auto desc_at = [&](uint32_t lo) { return desc_hi | lo; };
  auto stage16 = [](int st) { return static_cast<uint32_t>(st * 2 * S::kTileBytes) >> 4; };

  int g = 0;        // stage of the CTA's next tile
  uint32_t gph = 0;  // parity of its current fill
  // fence: the tile may hold cp.async rows (UnitSlot::fence_from), which
  // the wgmma products read through the async proxy.
  auto wait_tile = [&](bool fence) {
    mbar_wait(bar_full(g), gph);
    fence_proxy_async_if(fence);
    __syncwarp();
  };
  auto release = [&](int st) {  // this warp's products are done with stage st
    if (lane == 0) mbar_arrive(bar_empty(st));
  };
  auto advance = [&]() {
    if (++g == ST) {
      g = 0;
      gph ^= 1;
    }
  };
  // Accumulators and Q fragments live across units: the first S product of
  // unit u + 1 runs under unit u's epilogue.
  float o[DF][4];
  float m[2], l[2];
  float s[NF][4];
  uint32_t pa[BN / 16][4];  // P of the previous tile (A operand of P V)
  // The warp's 16 Q rows as A fragments, one per 16 dims (ldmatrix from
  // the swizzled Q buffer: lane l addresses row l % 16, chunk 2 kk + l / 16).
  // Head size 256 (kQSmem): the S product reads Q from shared memory.
  constexpr bool kQSmem = S::kQSmem;
  uint32_t qa[kQSmem ? 1 : HS / 16][4];
  const int wrow0 = warp * 16;
  auto load_qa = [&](int u) {
    if constexpr (kQSmem) return;
    const uint8_t *b = q_buf(u);
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk)
      ldmatrix_x4(qa[kk], b + swz_chunk<BM>(wrow0 + (lane & 15), 2 * kk + (lane >> 4)));
    if constexpr (!std::is_same<MT, T>::value) {  // bf16 Q, fp16 products (fp8 cache)
#pragma unroll
      for (int kk = 0; kk < HS / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) qa[kk][e] = bf16x2_as_h2(qa[kk][e]);
    }
  };
  // The wgmma issue paths below are uniform over the warpgroup (no
  // per-warpgroup tile skipping: a warpgroup that sees none of a tile
  // multiplies it and masks it all), so the MMAs stay asynchronous.
  // Q of the warpgroup's 64 rows as the K-major A operand (kQSmem): the
  // same layout as K, rows 64 cwg .. of the unit's Q buffer.  Its
  // descriptor's low word sits in shared memory, one word per consumer
  // warp, and each S product reloads it (volatile: not hoisted into a
  // register).  Kept in a register it was spilled with the warpgroup index
  // and the barrier id (ptxas: 140 B stores / 128 B loads, 6 STL + 2 LDL
  // per key tile; Nsight Compute, causal 4x4096: 4.4 M local loads, 12.6 M
  // local stores); this way ptxas spills nothing.  H200, same-run A/B
  // (scripts/gpu-ab), eager us, 3 rounds, causal: 32x512 404.1-405.7 ->
  // 387.5-388.1, 16x1024 659.9-661.3 -> 647.0, 4x4096 2397-2478 ->
  // 2363-2405, 1x16384 9392-9483 -> 9303-9323.
  const int cwg = tid >> 7;
  __shared__ uint32_t s_dq0[S::kConsumers / 32];
  if constexpr (kQSmem) {
    if (lane == 0) s_dq0[warp] = static_cast<uint32_t>(wgmma_desc(smem_u32(sQ) + cwg * 64 * 128, 16, 1024));
    __syncwarp();
  }
  auto issue_s = [&](int gt) {  // S = Q K^T of the tile in stage gt (Q from registers or kQSmem)
    uint32_t dQ0 = 0;
    if constexpr (kQSmem) dQ0 = *static_cast<volatile uint32_t *>(&s_dq0[tid_x_now() >> 5]);
#pragma unroll
    for (int kk = 0; kk < HS / 16; ++kk) {
      const uint32_t koff = ((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4;
      if constexpr (kQSmem) {
        static_assert(QB == 1, "one Q buffer");
        const uint32_t qoff = ((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4;
        wgmma_ss<BN, MT>(s, desc_at(dQ0 + qoff), desc_at(dK0 + stage16(gt) + koff), kk > 0);
      } else {
        wgmma_rs<BN, MT>(s, qa[kk], desc_at(dK0 + stage16(gt) + koff), kk > 0);
      }
    }
    wgmma_commit();
  };
  // O += P V of the tile in stage gt; first: the unit's first P V, which
  // overwrites O (a unit's O starts as that product, so O is never zeroed:
  // 64 register moves per thread and unit at head size 128, at the unit
  // boundary, where both consumer warpgroups issue at once).  With the
  // slot's RowMap fields and final_stats' hardware log2 / reciprocal,
  // H100, same-run A/B, eager us, 3 rounds: causal 16x1024 309.8-313.6 ->
  // 305.5-308.5, 32x512 216.5-218.7 -> 210.5-212.2, head size 64 16x1024
  // 241.3-244.5 -> 232.5-233.9, head size 256 16x1024 790.3-792.9 ->
  // 736.2-742.2, fp8 cache 16x1024 374.8-380.6 -> 368.2-368.4, 8x2000
  // 476.0-476.8 -> 476.5-480.5, 4x4096 the same (power-cap swings).  The
  // consumers' boundary (setup, first softmax, epilogue) is issue-bound:
  // Nsight Compute, 16x1024, per unit and consumer warp, about 960 of the
  // 2660 instructions (docs/benchmarks.md, session 20).
  // V rows [16 k2, 16 k2 + 16) of the tile in stage gt (MN-major, B operand).
  auto desc_v = [&](int gt, int k2) { return desc_at(dV0 + stage16(gt) + ((k2 * 16 * 128) >> 4)); };
  auto issue_pv = [&](int gt, bool first) {
#pragma unroll
    for (int k2 = 0; k2 < BN / 16; ++k2)
      wgmma_rs_tb<HS, MT>(o, pa[k2], desc_v(gt, k2), k2 > 0 || !first);
    wgmma_commit();
  };
  // The P V product of a unit's last tile skips the 16-key steps at and
  // past the tile's key w, the first that no row of the warpgroup sees (its
  // causal / right-window bound, the unit's kend): P is zero there, so the
  // skip is exact.  The steps go by guard predicate on w, which is equal
  // over the warpgroup and broadcast from lane 0, so ptxas sees it uniform
  // and keeps the products asynchronous (a branch on a value it cannot
  // prove uniform serialised them, C7520).  Head size 128 only: at
  // head size 64 it was slower (H100, same-run A/B, causal 16x1024 228.4-230.2
  // -> 234.3-234.6 us).  Narrowing the S product or the softmax of that tile
  // as well made ptxas serialise the products (C7515 / C7511) or spill (the
  // softmax: 16x1024 306.0-307.4 -> 313.9-315.4 us).  H100, same-run A/B,
  // eager us, 3 rounds: causal 16x1024 306.0-307.4 -> 303.2-305.3, 32x512
  // 210.2-211.4 -> 209.2-209.8, fp8 cache 16x1024 345.1-347.7 -> 342.9-344.9.
  constexpr bool kNarrow = !kQSmem && HS == 128;
  auto issue_pv_last = [&](int gt, bool first, int w) {
    if constexpr (kNarrow) {
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2) {
        const uint64_t db = desc_v(gt, k2);
        if (k2 < 2)
          wgmma_rs_tb<HS, MT>(o, pa[k2], db, k2 > 0 || !first);
        else
          wgmma_rs_tb_if<HS, MT>(o, pa[k2], db, 1, k2 * 16 < w);
      }
      wgmma_commit();
    } else {
      issue_pv(gt, first);
    }
  };
  // Unit u's slot once its Q has landed (ntiles == 0: the CTA's units ended).
  // kQSmem: the cp.async rows of Q are then read by wgmma (async proxy).
  auto unit_slot = [&](int u) -> const UnitSlot & {
    mbar_wait(bar_qfull(u % QB), (u / QB) & 1);
    if constexpr (kQSmem) fence_proxy_async_if(true);
    __syncwarp();
    return ring[u % kUnitRing];
  };
  // The unit's Q buffer is free for the unit QB further on (once the Q
  // fragments are in registers; kQSmem: once the unit's last S product has
  // landed).
  auto q_release = [&](int u) { mbar_arrive(bar_qempty(u % QB)); };
  // (The first S of a unit is issued without a branch, so that ptxas keeps
  // the products asynchronous: with no such unit it multiplies stale
  // buffers, never read.)
  // Pingpong turns: warpgroup c issues products between turn_sync (named
  // barrier 3 + c: its own 128 threads and the other warpgroup's arrival)
  // and turn_arrive (the other's barrier).  Warpgroup 1's arrival here
  // gives warpgroup 0 the first turn; warpgroup 0 takes the last one back
  // after the loop, so both barriers end balanced.  H100, same-run A/B
  // (TFLOP/s, 3 rounds): causal 16x1024 398.8-399.5 -> 401.6-406.8,
  // 1x16384 617-631 -> 631-633, head size 64 16x1024 259-263 -> 266-270,
  // non-causal 4x4096 597-604 -> 604-605.
  // kQSmem: the warpgroup index is reread from %tid.x at each turn (with
  // 48-key tiles ptxas spilled it, 2 STL + 1 LDL per key tile); head sizes
  // 64 and 128 keep cwg (their SASS unchanged).
  auto turn_wg = [&]() {
    if constexpr (kQSmem) return tid_x_now() >> 7;
    else return cwg;
  };
  auto turn_sync = [&]() { named_barrier_sync(3 + turn_wg(), S::kConsumers); };
  auto turn_arrive = [&]() { named_barrier_arrive(4 - turn_wg(), S::kConsumers); };
  if (cwg == 1) named_barrier_arrive(3, S::kConsumers);
  const bool any = unit_slot(0).ntiles != 0;
  if (any) wait_tile(ring[0].fence_from == 0);
  load_qa(0);
  if constexpr (!kQSmem) q_release(0);  // unit QB's Q may come (Q is in registers)
  turn_sync();
  wgmma_fence();
  issue_s(g);
  turn_arrive();
#pragma unroll 1
  for (int u = 0; any; ++u) {  // (left at the break below, after the last unit)
    const UnitSlot &us = ring[u % kUnitRing];
    const AttnItem it = us.it;
    const AttnReq rq = us.rq;
    const int kvh = us.kvh, qpos0 = us.qpos0, kstart = us.kstart, kend = us.kend, ntiles = us.ntiles;
    const int fence_from = us.fence_from;
    sc.causal = rq.causal != 0 && p.allow_causal != 0;
    sc.kend = kend;

    // Rows -> tokens and heads (RowMap): q_row0 / G and % G come from the
    // producer's derive, 1 / G from the kernel start (no division here).
    const RowMap rm = row_map_at(p, rq, kvh, us.t0, us.x0, inv_g);
    int head[2];
    const RowCtx rc = row_ctx_of(p, it, rm, qpos0, wrow0, gq, head);
    const bool warp_active = wrow0 < it.num_rows;
    const bool warp_full = wrow0 + 16 <= it.num_rows;
    const int wlast = (warp_full ? wrow0 + 16 : it.num_rows) - 1;
    const int wqmin = qpos0 + rm.token(wrow0);
    const int wqmax = qpos0 + rm.token(warp_active ? wlast : wrow0);
    // The unit's tiles t_lo <= t < t_hi are visible to every row of the warp
    // (no masks): key k0 + BN - 1 < kend, causal and right-window bounds of
    // the warp's first row, left-window bound of its last.
    int t_lo = 0, t_hi = 0;
    if (warp_full) {
      const int hi = visible_end(sc, wqmin);
      t_hi = hi - kstart >= BN ? (hi - kstart - BN) / BN + 1 : 0;
      if (p.window_left >= 0 && wqmax - p.window_left > kstart)
        t_lo = (wqmax - p.window_left - kstart + BN - 1) / BN;
    }

    // Keys of the unit's last tile that some row of this warpgroup sees
    // (issue_pv_last): those below hi, the bound of its last row (a
    // warpgroup past the item's rows: 1).
    int w_last = BN;
    if constexpr (kNarrow) {
      const int r_last = min(64 * cwg + 63, it.num_rows - 1);
      int hi = kstart + (ntiles - 1) * BN + 1;
      if (r_last >= 64 * cwg) hi = visible_end(sc, qpos0 + rm.token(r_last));
      // (Broadcast from lane 0, so that ptxas sees a warp-uniform value.)
      w_last = __shfl_sync(0xffffffffu, hi - kstart - (ntiles - 1) * BN, 0);
    }

    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    // Scale / soft-cap / ALiBi / masks and the softmax step on S of the
    // unit's tile t (the unmasked path when the warp sees the whole tile).
    auto softmax_tile = [&](int t, float (&alpha)[2]) {
      const int k0 = kstart + t * BN;
      const float pre = scores_to_logits(s, sc, rc, k0, tq);
      if (t < t_lo || t >= t_hi) apply_masks(s, sc, rc, k0, tq);
      return softmax_update(s, m, l, alpha, pre);
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int k2 = 0; k2 < BN / 16; ++k2) {
        pa[k2][0] = Elem<MT>::pack2(s[2 * k2][0], s[2 * k2][1]);
        pa[k2][1] = Elem<MT>::pack2(s[2 * k2][2], s[2 * k2][3]);
        pa[k2][2] = Elem<MT>::pack2(s[2 * k2 + 1][0], s[2 * k2 + 1][1]);
        pa[k2][3] = Elem<MT>::pack2(s[2 * k2 + 1][2], s[2 * k2 + 1][3]);
      }
    };

    bool more;  // a next unit
    {
      float alpha[2];
      int prev = g;
      wgmma_wait<0>();  // S of the first tile (issued before the unit started)
      wgmma_fence_regs(s);
      if (kQSmem && ntiles == 1) q_release(u);
      softmax_tile(0, alpha);  // no rescale: the first P V overwrites O
      pack_p();
      advance();
#pragma unroll 1
      for (int t = 1; t < ntiles; ++t) {
        wait_tile(t >= fence_from);
        wgmma_fence_regs(o);
        wgmma_fence_regs(pa);
        turn_sync();
        wgmma_fence();
        bool rescale;
        if constexpr (kQSmem) {
          // Head size 256 (3 stages): P V(t - 1) goes first and its stage
          // is released as soon as it lands, before the softmax of t, so
          // the producer refills it a softmax earlier.  H200, same-run A/B
          // (32 x 4 tiles, eager us): causal 16x1024 649 -> 641, 4x4096
          // 2285-2352 -> 2228-2263, 1x16384 9147-9155 -> 8995-9027.  At
          // head size 128 the same order made ptxas insert warpgroup.arrive
          // and spill.
          issue_pv(prev, t == 1);
          issue_s(g);
          turn_arrive();
          wgmma_wait<1>();  // P V of the previous tile landed: O, pa and its stage are free
          wgmma_fence_regs(o);
          wgmma_fence_regs(pa);
          release(prev);
          wgmma_wait<0>();
          wgmma_fence_regs(s);
          if (t == ntiles - 1) q_release(u);  // the unit's last S product landed
          rescale = softmax_tile(t, alpha);
        } else {
          issue_s(g);
          issue_pv(prev, t == 1);  // under this tile's softmax
          turn_arrive();
          wgmma_wait<1>();
          wgmma_fence_regs(s);
          rescale = softmax_tile(t, alpha);
          wgmma_wait<0>();  // P V of the previous tile landed: O, pa and its stage are free
          wgmma_fence_regs(o);
          wgmma_fence_regs(pa);
          release(prev);
        }
        if (rescale) rescale_rows(o, alpha);
        pack_p();
        prev = g;
        advance();
      }
      // One turn issues this unit's last P V and the next unit's first S
      // product (its Q and first tile); S runs under this unit's epilogue.
      // (The last S product landed above, so the Q fragments are free.)
      const UnitSlot &nx = unit_slot(u + 1);
      more = nx.ntiles != 0;
      if (more) wait_tile(nx.fence_from == 0);
      load_qa(u + 1);
      if constexpr (!kQSmem) q_release(u + 1);  // unit u + 1 + QB's Q may come
      wgmma_fence_regs(o);
      wgmma_fence_regs(pa);
      turn_sync();
      wgmma_fence();
      issue_pv_last(prev, ntiles == 1, w_last);
      issue_s(more ? g : prev);
      turn_arrive();
      wgmma_wait<1>();  // P V landed (the S product is still running)
      wgmma_fence_regs(o);
      release(prev);
    }

    if (warp_active) {
      if (it.ws_base < 0) {
        // Final rows: the warp's 16 normalised rows go through its own 8
        // staging rows, 8 at a time, written by stmatrix (8 per thread at
        // head size 128, where 4-byte stores took 32) in the XOR-swizzled
        // layout (no bank conflicts), and leave as 16-byte coalesced stores.
        // (They went through the unit's Q buffer until it was released at
        // the end of the previous key loop: H100, same-run A/B, TFLOP/s:
        // causal 16x1024 401.0-405.7 -> 403.6-406.3, head size 64 264.3-267.1
        // -> 267.0-270.2, 32x512 287.5-291.2 -> 288.7-292.7, 1x16384 the same.)
        float f[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float lse;
          row_final(p, it, m[i], l[i], head[i], &lse, &f[i]);
          if (tq == 0 && rc.valid[i])
            store_lse(p, head[i], rq.q_start + (rc.qpos[i] - qpos0), lse);
        }
        // Lane j < 16 computes row wrow0 + j's output address once; each
        // step stores LPR rows of CO chunks, taking the addresses by shuffle.
        // Head size 256 goes through the staging rows in two column halves
        // (NCP passes of kOutCols).
        constexpr int CO = S::kOutCols / 8, NCP = HS / S::kOutCols, DFO = DF / NCP;
        constexpr int LPR = 32 / CO;
        T *row_out;
        {
          int64_t tok;
          int h;
          rm.of(wrow0 + (lane & 15), &tok, &h);
          row_out = static_cast<T *>(p.out) + tok * p.o_stride_tok + static_cast<int64_t>(h) * p.o_stride_head;
        }
        const uint8_t *wst = sOut + warp * 8 * S::kOutCols * 2;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {  // rows 8 hf .. 8 hf + 7 of the warp
#pragma unroll
          for (int cp = 0; cp < NCP; ++cp) {  // columns cp kOutCols ..
            // stmatrix: matrices = the 8 rows x chunks df .. df + 3; lane l
            // addresses row l % 8, chunk df + l / 8.
#pragma unroll
            for (int d0 = 0; d0 < DFO; d0 += 4) {
              const int df = cp * DFO + d0;
              stmatrix_x4(smem_u32(wst) + swz_chunk<8>(lane & 7, d0 + (lane >> 3)),
                          Elem<T>::pack2(o[df][2 * hf] * f[hf], o[df][2 * hf + 1] * f[hf]),
                          Elem<T>::pack2(o[df + 1][2 * hf] * f[hf], o[df + 1][2 * hf + 1] * f[hf]),
                          Elem<T>::pack2(o[df + 2][2 * hf] * f[hf], o[df + 2][2 * hf + 1] * f[hf]),
                          Elem<T>::pack2(o[df + 3][2 * hf] * f[hf], o[df + 3][2 * hf + 1] * f[hf]));
            }
            __syncwarp();
#pragma unroll
            for (int k = 0; k < 8 / LPR; ++k) {
              const int r = lane / CO + LPR * k, c = lane % CO;
              T *out = reinterpret_cast<T *>(
                  __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(row_out), 8 * hf + r));
              if (wrow0 + 8 * hf + r < it.num_rows)
                *reinterpret_cast<uint4 *>(out + cp * S::kOutCols + c * 8) =
                    *reinterpret_cast<const uint4 *>(wst + swz_chunk<8>(r, c));
            }
            __syncwarp();  // the staging rows are read before the next pass
          }
        }
      } else {
        store_rows<T, DF>(p, it, rq, kvh, wrow0, gq, tq, o, m, l, rc, head);
      }
    }
    // Scratch: the staging rows (every consumer warp is past its staging
    // once the merge's first barrier is passed).  The merge syncs again
    // after its last read of them: the next unit's epilogue can follow a
    // single product turn, which does not wait for the other warpgroup to
    // leave the merge.  (A barrier after the call instead, outside the
    // merge's own branch, made ptxas keep the stage index in vector
    // registers: every wgmma descriptor then went through R2UR.)
    if (it.merge != 0)
      merge_split_tile<T, HS>(p, it, rq, kvh, reinterpret_cast<float *>(sOut), S::kConsumers,
                              [] { named_barrier_sync(2, S::kConsumers); }, true);
    if (!more) break;
  }
  wgmma_wait<0>();  // the stale product past the last unit
  if (cwg == 0) turn_sync();  // warpgroup 1's last arrival
#endif  // VATTN_SM90A
}

}  // namespace kern
}  // namespace vattn
