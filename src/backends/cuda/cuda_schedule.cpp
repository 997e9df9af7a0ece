// cuda_schedule.cpp -- see cuda_schedule.h.
#include "backends/cuda/cuda_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_util.h"
#include "backends/unit_order.h"
#include "core/error.h"

namespace vattn {
namespace {

constexpr int kDefaultMaxSplits = 16;     // max_num_splits 0: general tiles
constexpr int kDecDefaultMaxSplits = 64;  // ... decode tiles (32 for two-head CTAs)
constexpr int kMinKeysPerSplit = 256;
constexpr int kSplitAlign = 64;  // multiple of every kernel's key tile

// Decode kernel (kernels/decode.cuh) scheduling: a request whose query
// rows (query_len * G) fit one 16-row item goes to the decode kernel; its
// key range is split so that the kernel's CTAs fill the GPU in as few waves
// as possible (cost model below).
// Parts of at least kDecMinKeysPerSplit keys; parts shorter than
// kDecShortSplitKeys only while the batch's CTAs fit one per SM (a short
// context is latency-bound: a part's chain of dependent loads, not its
// bytes, sets its time, and a second CTA on an SM does not shorten it).
// H100, bf16 D128 unless noted, eager us, 256-key parts -> this rule:
// 1x512 12.4 -> 10.2, 1x1024 12.5 -> 11.2, 2x1024 13.4 -> 12.9, fp8 1x512
// 12.2 -> 10.3, fp8 1x1024 12.4-12.6 -> 10.9, D256 1x1024 17.2-17.3 ->
// 15.2-15.4; long contexts unchanged.  256-key parts on 256 CTAs beat
// 128-key parts (2x2048 15.3 against 16.2, 4x1024 15.4 against 16.1).
constexpr int kDecMinKeysPerSplit = 64;
constexpr int kDecShortSplitKeys = 256;
// A tile split into more than kDecMergeRoundParts parts costs its merging
// CTA more rounds of partial loads (the decode kernel's merge prefetches 8,
// 16 until session 25: see kMergePre in decode.cuh), modelled as
// dec_merge_keys more keys (cuda_decode_cost_keys): 1x8192 then takes 16
// parts instead of 32 (21.3 -> 21.1 us).  The threshold stays at 16 parts, not
// the 8 the merge now prefetches: H200, eager us, 2 rounds, 16 -> 8 (the
// model's parts in brackets): 1x8192 17.4 -> 17.9-18.1 (16 -> 32), 1x4096
// 13.4-13.5 -> 15.2-15.4 (16 -> 8), fp8 2x8192 18.3-18.4 -> 22.1 (16 ->
// 8), fp8 8 x 2k-32k 96.7 -> 104.0-104.2 (16 -> 18); fp8 1x16384 gained
// (22.7-22.8 -> 18.9-19.0), which the fp8 merge keys now give
// (cuda_decode_cost_keys).
constexpr int kDecMergeRoundParts = 16;
// Lone CTAs (CudaBuilderCfg::dec_lone, search_decode_splits): where the
// CTAs fill more than half the SMs, one per SM, and the plan leaves its
// tiles whole, splits them at least kDecLoneMinParts ways (the paired plan
// would merge twice as many), or gives each CTA at least kDecLoneMinKeys
// keys.
constexpr int kDecLoneMinParts = 8;
constexpr int64_t kDecLoneMinKeys = 4096;
// Warp rounds (CudaBuilderCfg::dec_rounds, search_decode_splits): plans of
// several waves count them for longest parts of at least
// kDecWaveRoundMinKeys keys, one-wave plans (dec_rounds 2) for parts of
// kDecShortSplitKeys to kDecOneWaveRoundKeys - 1 keys.
constexpr int64_t kDecWaveRoundMinKeys = 512;
constexpr int64_t kDecOneWaveRoundKeys = 1024;

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Parts of a tile of `range` keys under a split count s: min(s, range /
// min_keys) (at least 1), each `*chunk` keys, a multiple of A (the last
// part may be shorter).
template <uint32_t A>
int split_parts(int64_t range, int64_t s, int64_t min_keys, int64_t *chunk) {
  // 32-bit unsigned arithmetic (a 64-bit division costs several times as
  // much on common x86 cores, and the decode search runs this per tile):
  // range <= INT32_MAX, s <= max splits, so no sum below wraps.
  const uint32_t r = static_cast<uint32_t>(range);
  if (s <= 1) {  // one part: no division (most tiles of an unsplit plan)
    *chunk = r;
    return 1;
  }
  uint32_t st = static_cast<uint32_t>(
      std::min<int64_t>(s, std::max<uint32_t>(1, r / static_cast<uint32_t>(min_keys))));
  uint32_t ch = r;
  if (st > 1) {
    ch = ((r + st - 1) / st + A - 1) / A * A;
    st = (r + ch - 1) / ch;
  }
  *chunk = ch;
  return static_cast<int>(st);
}
// A decode tile's parts: chunks of kern::kDecodeKeyAlign keys, finer than
// the general items' kSplitAlign, so that the split count fills the
// resident CTA slots exactly (decode items only need kv_begin %
// kDecodeKeyAlign == 0).
int decode_parts(int64_t range, int64_t s, int64_t min_keys, int64_t *chunk) {
  return split_parts<kern::kDecodeKeyAlign>(range, s, min_keys, chunk);
}

// Decode tiles longest key range first, ties in request order.  The decode
// kernel's CTAs start in item order, so when a batch of mixed contexts
// takes several waves the short parts run last and the waves end together
// (list scheduling, longest first).  H100, bf16 D128, eager us, 3 rounds,
// request order -> longest first (vattn-bench --len-min): 128 x 128-2k
// 219.3-219.5 -> 214.1-214.3; 256 x 64-1k 204.0-204.2 -> 198.9-199.3; 96 x
// 1k-3k 288.8-289.0 -> 285.9-286.1; 240 x 1k-4k 855.6-855.8 -> 852.0; 64 x
// 512-8k 426.0-426.3 -> 424.8-425.3; 16 x 1k-16k (split, one wave)
// 189.0-189.3 -> 178.7-178.9 (2 rounds); equal contexts (32x4096)
// unchanged.  With an fp8 cache it was slower when applied (240 x 1k-4k
// 465.2-465.3 -> 471.5-472.2), so the builder asks for it with 16-bit
// caches only.
void order_longest_first(CudaScheduleScratch *sc) {
  auto &d = sc->dtiles;
  auto &keys = sc->dec_order;
  bool sorted = true;
  for (size_t i = 1; i < d.size() && sorted; ++i)
    sorted = d[i].kv_hi - d[i].kv_lo <= d[i - 1].kv_hi - d[i - 1].kv_lo;
  if (sorted) return;  // equal contexts, or already in order
  // One 64-bit key per tile: (INT32_MAX - range) above the tile's index.
  keys.resize(d.size());
  for (size_t i = 0; i < d.size(); ++i)
    keys[i] = (static_cast<uint64_t>(INT32_MAX - (d[i].kv_hi - d[i].kv_lo)) << 32) | i;
  std::sort(keys.begin(), keys.end());
  sc->dec_tmp.assign(d.begin(), d.end());
  for (size_t i = 0; i < d.size(); ++i) d[i] = sc->dec_tmp[keys[i] & 0xffffffffu];
}

// The decode split count s in [1, s_cap] minimising the modelled time
//   min(waves(s) * (longest + C), ceil(work(s) / slots) + tail(s) + C)
//   (+ dec_merge_keys when a tile has more than kDecMergeRoundParts parts),
// in keys, C = dec_cta_keys (a CTA's fixed cost), waves(s) = ceil(CTAs /
// resident slots), work(s) = the CTAs' keys + C each; parts under
// kDecShortSplitKeys only while the CTAs fit one per SM; the search stops
// at the first s past the remaining item or workspace room; ties go to
// fewer splits.
// The second bound is for batches of mixed contexts, where whole waves of
// the longest part overstate the time.  H100, bf16 D128 unless noted, eager
// us, tiles in request order, waves bound alone -> both (vattn-bench
// --len-min, 3 rounds): 64 x
// 512-8k 444.7-445.3 -> 426.0-426.2; 16 x 1k-16k 217.4-217.9 -> 188.2-188.8;
// 256 x 64-1k 208.1-208.6 -> 203.7-203.9; 48 x 4k-12k 560.1-560.6 ->
// 551.7-552.0; D64 64 x 512-8k 233.8-233.9 -> 229.2-229.6; 240 x 1k-4k
// unchanged (855.4-856.0; one part each would take 840).  20 equal-
// context shapes, the benchmark table's among them, keep their split count
// (computed on the host for 132 SMs x 2 slots).
// tail(s) is the longest part, except when the parts fill more than one
// round of slots.  Tiles longest first (order_longest_first): the part that
// starts first after the first round (up to two rounds) or the last part
// (more) -- the parts that end the kernel in a longest-first list
// schedule.  Tiles in request order: a part of mean length (below).
// H100, bf16 D128, eager us, 2 rounds, split count with the longest part
// as the tail -> this tail (forced counts, a dev overlay): 240 x 1k-4k
// 2 -> 1 parts 851.8 -> 831.6-832.1; 128 x 128-2k 2 -> 1 214.3-214.4 ->
// 209.1-209.2; 64 x 512-8k 6 -> 2 425.0 ->
// 418.8; 96 x 1k-3k 3 -> 2 285.8-286.0 -> 284.1-284.4; 32 x 256-8k 9 -> 3
// 189.7 -> 186.0-186.1; 48 x 4k-12k 8 -> 5 551.4-551.7 -> 546.8; 8 x
// 2k-32k 4 -> 5 223.9-228.4 -> 223.7-224.0.  (The best forced count was
// one part on 96 x 1k-3k, 278.5, and 64 x 512-8k, 418.0-418.2; 3 on 48 x
// 4k-12k, 543.4-543.7; 8 on 8 x 2k-32k, 218.2.)
// With the tiles in request order (fp8 caches) and more parts than one
// round of slots, the tail is a part of mean length (keys / parts): the
// part that starts last is as likely short as long.  H100, fp8 D128, eager
// us, 2 rounds, longest part -> mean part: 8 x 2k-32k 130.5-130.9 ->
// 120.0-120.1; 64 x 512-8k 240.1-240.2 -> 232.4-232.7; 96 x 1k-3k
// 170.1-170.4 -> 166.7-167.3; 48 x 4k-12k 307.0-307.6 -> 301.8-302.1; 32 x
// 256-8k 118.2-118.5 -> 116.4-116.7; 16 x 1k-16k 120.1-120.8 ->
// 119.4-119.7 (8 forced parts: 107); 240 x 1k-4k and 128 x 128-2k
// unchanged (one forced part: 453, against 465.5).  Equal contexts keep
// their split (every part is a mean part).
//
// Host time: O(tiles + s_cap), not O(tiles * s_cap) (the plain search took
// 27 us for 240 decodes at up to 4k keys on the GPU machine's CPU), plus
// the tail's walk over the first round's tiles.  A tile whose part cap
// k = max(1, range / min_keys) is <= s has k parts whatever s is
// ("saturated"): tiles are bucketed by k and each bucket's saturated sums
// are computed once.  A tile with k > s gets exactly s parts when
// range > A * s * (s - 1) (A = kDecodeKeyAlign: chunk < range / s + A, so
// range / chunk > s - 1), and its longest / shortest chunk come from the
// bucket's largest / smallest range (the chunk grows with the range); only
// an s that fails this (s > 17 with 256-key parts) visits those tiles one
// by one.
int search_decode_splits(const CudaBuilderCfg &c, const std::vector<CudaScheduleScratch::Tile> &dtiles,
                         bool longest_first, int64_t min_keys, int s_cap, int64_t item_room, int64_t ws_room,
                         std::vector<CudaScheduleScratch::DecBucket> *buckets, int64_t *cost_out) {
  using Bucket = CudaScheduleScratch::DecBucket;
  const int G = c.group;
  const int nb = s_cap + 2;  // buckets 1 .. s_cap, and s_cap + 1: never saturated
  std::vector<Bucket> &B = *buckets;
  B.assign(static_cast<size_t>(nb), Bucket{});
  int64_t sum_range = 0;  // keys of all decode tiles (however they are split)
  for (const auto &t : dtiles) {
    const int64_t range = t.kv_hi - t.kv_lo;
    sum_range += range;
    const int64_t rows = static_cast<int64_t>(t.ntok) * G;
    const int k = static_cast<int>(std::min<int64_t>(s_cap + 1, std::max<int64_t>(1, range / min_keys)));
    Bucket &b = B[k];
    if (b.n == 0 || range < b.rmin) b.rmin = range;
    b.rmax = std::max(b.rmax, range);
    ++b.n;
    b.rows += rows;
    if (k <= s_cap) {  // its parts once s >= k
      int64_t chunk = 0;
      const int st = decode_parts(range, k, min_keys, &chunk);
      b.items += st;
      if (st > 1) b.ws += st * rows;
      b.chunk = std::max(b.chunk, chunk);
      b.parts = std::max(b.parts, st);
      b.short_parts = b.short_parts || (st > 1 && chunk < kDecShortSplitKeys);
    }
  }
  // Suffix aggregates of the unsaturated buckets: [k] covers buckets >= k.
  B[nb - 1].suf_n = B[nb - 1].n;
  B[nb - 1].suf_rows = B[nb - 1].rows;
  B[nb - 1].suf_rmax = B[nb - 1].rmax;
  B[nb - 1].suf_rmin = B[nb - 1].rmin;
  for (int k = nb - 2; k >= 1; --k) {
    Bucket &b = B[k];
    const Bucket &u = B[k + 1];
    b.suf_n = b.n + u.suf_n;
    b.suf_rows = b.rows + u.suf_rows;
    b.suf_rmax = std::max(b.rmax, u.suf_rmax);
    b.suf_rmin = b.n == 0 ? u.suf_rmin : (u.suf_n == 0 ? b.rmin : std::min(b.rmin, u.suf_rmin));
  }

  const int64_t heads = c.o.num_kv_heads / c.dec_heads;
  // Resident slots counted in parts (a part runs as `heads` CTAs).
  const int64_t part_slots = (c.dec_slots + heads - 1) / heads;
  // The chunk of part number k (0-based) when the tiles are listed in
  // order, each with its parts; of the last tile's parts.
  auto chunk_at = [&](int s, int64_t k) {
    int64_t chunk = 0;
    for (const auto &t : dtiles) {
      const int st = decode_parts(t.kv_hi - t.kv_lo, s, min_keys, &chunk);
      if (k < st) break;
      k -= st;
    }
    return chunk;
  };
  auto last_chunk = [&](int s) {
    int64_t chunk = 0;
    decode_parts(dtiles.back().kv_hi - dtiles.back().kv_lo, s, min_keys, &chunk);
    return chunk;
  };
  int best_s = 1;
  int64_t best_cost = -1;
  int64_t sat_items = 0, sat_ws = 0, sat_chunk = 0;  // saturated buckets 1 .. s
  int sat_parts = 1;
  bool sat_short = false;
  for (int s = 1; s <= s_cap; ++s) {
    const Bucket &bs = B[s];
    sat_items += bs.items;
    sat_ws += bs.ws;
    sat_chunk = std::max(sat_chunk, bs.chunk);
    sat_parts = std::max(sat_parts, bs.parts);
    sat_short = sat_short || bs.short_parts;
    int64_t items_s = sat_items, ws_s = sat_ws, longest = sat_chunk;
    int max_parts = sat_parts;
    bool short_parts = sat_short;
    const Bucket &u = B[s + 1];  // tiles with more than s parts' worth of keys
    if (u.suf_n > 0) {
      constexpr int64_t A = kern::kDecodeKeyAlign;
      if (u.suf_rmin > A * s * (s - 1)) {  // each gets exactly s parts
        int64_t cmax = 0, cmin = 0;
        decode_parts(u.suf_rmax, s, min_keys, &cmax);
        decode_parts(u.suf_rmin, s, min_keys, &cmin);
        items_s += s * u.suf_n;
        if (s > 1) ws_s += s * u.suf_rows;
        longest = std::max(longest, cmax);
        max_parts = std::max(max_parts, s);
        short_parts = short_parts || (s > 1 && cmin < kDecShortSplitKeys);
      } else {
        for (const auto &t : dtiles) {
          const int64_t range = t.kv_hi - t.kv_lo;
          if (range / min_keys <= s) continue;  // saturated: counted above
          int64_t chunk = 0;
          const int st = decode_parts(range, s, min_keys, &chunk);
          items_s += st;
          if (st > 1) ws_s += static_cast<int64_t>(st) * t.ntok * G;
          longest = std::max(longest, chunk);
          max_parts = std::max(max_parts, st);
          short_parts = short_parts || (st > 1 && chunk < kDecShortSplitKeys);
        }
      }
    }
    if (s > 1 && (items_s > item_room || ws_s > ws_room)) break;
    const int64_t ctas = items_s * heads;
    if (short_parts && ctas > c.num_sms) continue;
    const int64_t waves = (ctas + c.dec_slots - 1) / c.dec_slots;
    const int64_t merge = max_parts > kDecMergeRoundParts ? c.dec_merge_keys : 0;
    // Warp rounds.  Warp w of a CTA takes tiles w, w + 4, ..., and a wave
    // ends with its slowest warp, so in plans of more than one wave the
    // longest part (of 512 keys or more) counts whole rounds of the 4 warps
    // (its keys rounded up to a round).  Near ties then go to fewer, longer
    // parts in fewer waves, which the GPU prefers.  H200, eager us, 2
    // rounds, 32 / 8 heads at head size 128 unless noted, before -> this
    // rule (parts): fp8 6x16384 65.7-65.9 -> 61.9 (11 -> 5); fp8, 4 KV heads, 12x16384
    // 65.7-65.9 -> 61.6-61.8 (11 -> 5); fp8 12x32768 221.2-221.5 -> 216.6
    // (11 -> 8); fp8 7x12288 58.7-58.9 -> 57.6-57.8 (9 -> 4); fp8 12x3072
    // 33.6-33.8 -> 33.1-33.2 (5 -> 2); 2 KV heads 48x6144 83.5-83.6 ->
    // 82.0-82.3 (5 -> 1); slower: 7x65536 433.9-434.7 -> 436.4-437.6 (14 ->
    // 9).  One-wave plans count rounds too where the longest part has
    // 256-1023 keys on 16-bit caches at head size 128 (dec_rounds 2):
    // 4 KV heads 7x3072 20.0-20.2 -> 19.5-19.7 (9 -> 8), 2 KV heads 7x4096
    // 16.6-16.8 -> 15.9-16.1 (9 -> 8), 4 KV heads 1x10000 15.1-15.2 ->
    // 14.8-14.9 (33 -> 32); faster on all 10 batches of a hold-out draw,
    // by 0.8-2.4%.  Elsewhere one-wave rounds did not pay: fp8 lost up to
    // 3.5% (2 KV heads 5x10000 17.1-17.2 -> 17.7-17.8, 25 -> 23), head size
    // 64 gained on 7 of 12 batches but lost up to 1.7% (2 KV heads 3x24576
    // 19.1 -> 19.4-19.5), 256 gained nothing, and parts of 1024 keys or
    // more lost as often as they won (1 KV head 6x32768 33.9-34.1 ->
    // 34.5-34.7, 22 -> 16).  The first rule's 512-key floor keeps every
    // timed plan that gained and leaves batches of mixed contexts as they
    // were; without it, 6 of 360 probe batches would move, none timed (1
    // KV head fp8 16 x 1k-16k from 54 parts to 16), and head size 64
    // 12x2048 would take 2 parts instead of 5, which timed the same
    // (20.40-20.45 -> 20.32-20.45).  docs/benchmarks.md, "H200, session
    // 33".  Not run on an H100.
    const bool rounds = (c.dec_rounds >= 1 && waves > 1 && longest >= kDecWaveRoundMinKeys) ||
                        (c.dec_rounds >= 2 && longest >= kDecShortSplitKeys && longest < kDecOneWaveRoundKeys);
    if (rounds)
      longest = (longest + kern::kDecodeRoundKeys - 1) / kern::kDecodeRoundKeys * kern::kDecodeRoundKeys;
    // Two bounds on the kernel's time; the smaller is the estimate.  Equal
    // parts run in waves; parts of unequal length (a batch of mixed
    // contexts) keep every slot busy until the work runs out, then one
    // more part: work / slots + tail, tail = the longest part, or past one
    // round of parts, with the tiles longest first (list scheduling in that
    // order) the part that starts after the first round (at most two rounds
    // of parts) or the last part (more), in request order a mean part.
    const int64_t work = heads * (sum_range + items_s * c.dec_cta_keys);
    int64_t tail = longest;
    if (items_s > part_slots) {
      if (longest_first)
        tail = items_s < 2 * part_slots ? chunk_at(s, part_slots) : last_chunk(s);
      else
        tail = (sum_range + items_s - 1) / items_s;  // request order: a part of mean length
    }
    // With fewer saturating slots S than resident ones R (a 16-bit cache at
    // head size 64: 2 of 4 CTAs per SM), an SM's k = S / SMs CTAs already
    // take its share of the bandwidth and more resident ones divide it: the
    // equal parts' bound follows the most loaded SM (ceil(ctas / SMs) CTAs
    // at k per time unit, at least `waves` units), the work is done by S
    // slots, and the longest part runs at its SM's share (crit).  A split
    // then also pays a part's fixed cost for its merge.  S == R leaves the
    // bounds as they were (16-bit D128 and D256, fp8).
    const int64_t R = c.dec_slots, S = c.dec_sat_slots > 0 ? std::min<int64_t>(c.dec_sat_slots, R) : R;
    const int64_t k = std::max<int64_t>(1, S / c.num_sms);
    const int64_t one = longest + c.dec_cta_keys;  // the longest part alone
    const int64_t sm_load = (ctas + c.num_sms - 1) / c.num_sms;
    int64_t equal = one * std::max(waves * k, sm_load) / k;
    // Lone CTAs (dec_lone: 16-bit caches at head size 128, where the model's
    // unit is a CTA that shares its SM with another).  A CTA alone on its SM
    // streams at the SM's whole share, twice a paired CTA's pace, so a plan of
    // one CTA per SM over more than half the SMs costs half its longest part
    // plus the fixed cost; and equal parts in several waves pay one more fixed
    // cost per wave past the first (each wave starts cold).  The model had
    // picked two waves of short parts, or two CTAs per SM, where one lone CTA
    // per SM is faster.  H200, bf16 32 / 8 heads unless noted, eager us, 2
    // rounds, VATTN_CUDA_DECODE_LONE=0 -> this rule: 13x4096 64.3-64.6 -> 58.1
    // (5 -> 1 parts); 14x8192 122.5-122.7 -> 114.8-114.9 (7 -> 1); 20x1024
    // 33.8-33.9 -> 28.7 (3 -> 1); 48x1024 61.4-61.7 -> 56.0 (2 -> 1); 12x2048
    // 33.3-33.7 -> 32.0-32.2 (2 -> 1); 7x12288 93.8-93.9 -> 89.7-90.1 (9 -> 2);
    // 6x16384 107.3-107.8 -> 102.2-102.5 (11 -> 5); 9x6144 66.4-66.6 -> 63.3 (7
    // -> 3); 5x24576 127.5-127.9 -> 123.6 (13 -> 3); 2x4096 17.3-17.5 ->
    // 16.8-16.9 (16 -> 8); 1x32768 40.5-40.8 -> 40.1-40.4 (33 -> 16); 8x8192
    // 71.0-71.2 -> 70.9-71.3 (4 -> 2); 4 KV heads 28x8192 120.7-120.9 ->
    // 112.1-112.4, 1x16384 18.8 -> 17.7-17.8 (3 rounds); 2 KV heads
    // 28x12288 93.5-94.0 -> 88.8-88.9; 1 KV head 96x2048 33.2-33.7 -> 32.1.  Of
    // 55 batches whose parts changed before the two limits (.gpu/run85.sh), 39
    // were faster, 7 the same and 9 slower: five short lone splits, which the
    // limits keep paired (3x2048 5 parts 14.9-15.0 -> 15.1-15.2, 4x8192 4 parts
    // 39.4-39.5 -> 39.8-39.9, 6x1024 2 parts 15.0-15.1 -> 15.4-15.6, 5x4096,
    // 8x4096), and four that had many waves: 28x16384 439.6-440.2 -> 451.2-452.2
    // (7 -> 1 parts, 224 CTAs), 28x12288 336.0-336.5 -> 340.3-340.4, 20x24576
    // 471.3-471.6 -> 472.9-475.1, 24x65536 1444.5-1444.8 -> 1446.9-1448.5.
    // Fewer CTAs than half the SMs leave the memory idle (1 KV head, 1x8192 and
    // 4x16384 in 16 parts, 16 and 64 CTAs: 12.0 -> 14.8, 18.8-19.0 -> 21.5-21.7;
    // with the limit 4x16384 takes 32 parts, 128 CTAs: 17.5-17.7).  Not run on
    // an H100.
    if (c.dec_lone) {
      const bool fills = ctas <= c.num_sms && 2 * ctas > c.num_sms;
      if (fills && (max_parts == 1 || max_parts >= kDecLoneMinParts || longest >= kDecLoneMinKeys))
        equal = (longest + 1) / 2 + c.dec_cta_keys;
      equal += (waves - 1) * c.dec_cta_keys;
    }
    const int64_t crit = one * std::max(std::min(sm_load, R / c.num_sms), k) / k;
    const int64_t mixed = std::max((work + S - 1) / S + tail + c.dec_cta_keys, S < R ? crit : 0);
    const int64_t cost = std::min(equal, mixed) + merge + (S < R && s > 1 ? c.dec_cta_keys : 0);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_s = s;
    }
  }
  *cost_out = best_cost;
  return best_s;
}

}  // namespace

// The cost model counts a CTA's fixed cost and a merge round in keys:
//            CTA   merge round
//   16-bit   128   256   (head size 64)
//   16-bit   256   256   (head sizes 128, 256)
//   fp8      256   128
// fp8 CTA: a key of an fp8 cache is half the bytes, so the same time is
// twice the keys.  H100, fp8 D128, eager us, 2 rounds, 128 / 256 CTA keys
// -> 256 / 512: 16 x 1k-16k 108.5-108.8 -> 106.3-106.5; 240 x 1k-4k
// 465.5-465.7 -> 453.1-453.2; 128 x 128-2k 131.6-131.7 -> 125.4-125.6; 48
// x 4k-12k 302.1-302.3 -> 296.2-296.4; 16 x 1k-4k 46.4 -> 44.4; 64 x
// 512-8k 232.8-232.9 -> 231.1-231.2; 32 x 256-8k 116.8-117.1 -> 121.1-121.6
// (6 -> 4 parts); 8 x 2k-32k and the equal 8x8192 the same.
// fp8 merge round: half the 16-bit cache's keys, not twice.  Past 16
// parts is where a single long request goes from one CTA per SM to two,
// and a lone fp8 CTA (two stages per warp) streams well below its SM's
// share, so the second CTA pays for the round.  At twice the keys the
// model tied 16 parts with 32 and took 16.  H200, eager us, 3 rounds, 512
// -> 128 merge keys (parts 16 -> 32, 33 at 1x10000): fp8 D128 1x16384
// 22.5-22.6 -> 18.8-18.9, 1x12288 19.3-19.5 -> 16.8-17.0, 1x10000
// 17.7-17.8 -> 15.9-16.1, 1x8192 16.0-16.2 -> 14.7-14.9; fp8 D64 1x16384
// 24.4-24.5 -> 19.8-20.1; 4 x 4k-32k (16 -> 27 parts) 67.9-68.9 ->
// 68.1-68.8; fp8 1x32768, 2x16384, D256 1x16384 and the mixed batches
// above keep their parts.
// 16-bit CTA at head sizes 128 and 256: at 128 keys the model took two
// waves of short parts where one wave of longer ones (some SMs holding a
// single CTA) is faster.  H200, eager us, 2 rounds, 128 -> 256 CTA keys:
// D128 6x8192 61.8-62.2 -> 54.3-54.6, 9x4096 48.2-48.5 -> 44.4, 12x2048
// 35.8 -> 33.1-33.2, 5x16384 90.7-90.9 -> 85.5-86.3, 10x16384 166.5 ->
// 160.1-160.3, 27x4096 116.5-116.7 -> 113.0-113.1, 96 x 1k-3k 194.5 ->
// 184.6-184.7, 34x8192 270.1-270.3 -> 271.5-271.7; D256 6x8192
// 112.5-112.7 -> 104.8, 12x2048 65.9-66.0 -> 53.5; the benchmark table's
// shapes and 16 x 1k-16k keep their parts.  Head size 64 keeps 128
// (6x8192 31.7-31.8 -> 32.2-32.3 at 256).
// The two H200 changes were not measured on the H100.
void cuda_decode_cost_keys(int32_t cache, int32_t head_size, int64_t *cta_keys, int64_t *merge_keys) {
  *cta_keys = kDecCtaOverheadKeys;
  *merge_keys = kDecMergeRoundKeys;
  if (cache != kern::kCacheAuto) {
    *cta_keys *= 2;
    *merge_keys /= 2;
  } else if (head_size >= 128) {
    *cta_keys *= 2;
  }
}

CudaBuilderCfg cuda_builder_cfg(const vattn_builder_options_t &o, const CudaDeviceFacts &d) {
  CudaBuilderCfg c;
  c.o = o;
  const int32_t G = o.num_heads / o.num_kv_heads;
  c.group = G;
  // Items of the kernel that serves the builder's cache kind on its device
  // (128 rows on the Hopper kernel, attention_kernel's BM elsewhere).
  c.tokens_per_tile = d.rows_per_tile / G;
  c.num_sms = d.num_sms > 0 ? d.num_sms : 1;
  c.max_splits = o.max_num_splits > 0 ? o.max_num_splits : kDefaultMaxSplits;
  // VATTN_CUDA_DECODE_KERNEL=0 routes decode requests to attention_kernel.
  const char *dk = std::getenv("VATTN_CUDA_DECODE_KERNEL");
  c.decode = G <= kern::kDecodeRows && o.block_size % kern::kDecodeKeyAlign == 0 &&
             !(dk && std::strcmp(dk, "0") == 0);
  // The decode CTA shape for the cache kind the caller named.
  const int32_t cache = cache_kind_of(o.kv_cache_dtype);
  c.dec_heads = kern::decode_kv_heads_per_cta(o.head_size, cache, o.num_kv_heads, G);
  c.dec_rows = kern::kDecodeRows / c.dec_heads;
  c.dec_longest_first = cache == kern::kCacheAuto;
  cuda_decode_cost_keys(cache, o.head_size, &c.dec_cta_keys, &c.dec_merge_keys);
  // Resident decode CTAs (the cost model's wave size): the device's count
  // where it is known.
  int32_t per_sm = o.head_size >= 256 ? 1 : 2;
  if (c.decode && d.dec_ctas_per_sm > 0) per_sm = d.dec_ctas_per_sm;
  c.dec_slots = c.num_sms * per_sm;
  // A 16-bit cache is read at the memory's pace by two CTAs per SM; the
  // four that fit at head size 64 share that bandwidth, and the split model
  // then splits less (search_decode_splits).  fp8 caches keep S = R and
  // their split counts: fp8 decode stays below the memory's pace, and more
  // resident CTAs do not speed it up (docs/benchmarks.md).  H100, bf16
  // D64, eager us, 3 rounds, 4 -> 2 saturating CTAs per SM: 32x4096
  // 103.7-104.1 -> 100.4-100.7 (2 -> 1 parts); 8x8192 56.4-56.5 ->
  // 55.6-55.8; 1x32768 34.3 -> 33.8-34.0; 1x16384 22.6-23.0 -> 22.0-22.2;
  // 4x4096 21.5-21.8 -> 21.1-21.4; 8 x 2k-32k 121.3-121.8 -> 117.6-117.9;
  // 240 x 1k-4k 449.8-450.1 -> 441.8-442.5; 48 x 4k-12k 293.3-293.7 ->
  // 291.4-291.6; 2x16384, 64x2048 and 16 x 1k-16k the same.
  c.dec_sat_slots = cache == kern::kCacheAuto ? c.num_sms * std::min<int32_t>(per_sm, 2) : 0;
  // Lone CTAs: measured on 16-bit caches at head size 128 only (head size
  // 64 lost with one saturating CTA per SM on the H100, session 15; head
  // size 256 runs one CTA per SM anyway, and a lone fp8 CTA streams below
  // its SM's share).  VATTN_CUDA_DECODE_LONE=0 turns the rule off (A/B).
  c.dec_lone = cache == kern::kCacheAuto && o.head_size == 128 && per_sm == 2;
  c.dec_rounds = c.dec_lone ? 2 : 1;
  if (const char *dr = std::getenv("VATTN_CUDA_DECODE_ROUNDS")) c.dec_rounds = std::clamp(std::atoi(dr), 0, 2);
  if (const char *dl = std::getenv("VATTN_CUDA_DECODE_LONE"))
    c.dec_lone = c.dec_lone && std::strcmp(dl, "0") != 0;
  c.dec_max_splits = o.max_num_splits > 0 ? o.max_num_splits : kDecDefaultMaxSplits;
  // Two-head CTAs split a request half as far by default: each part holds
  // twice the bytes per key, and a merge of 64 parts costs more than it
  // gains (H100, fp8 D64 eager us, cap 64 / 32 / 16, one-head plan:
  // 1x32768 29.4-29.7 / 27.7-27.8 / 38.7-38.9, 27.6-27.7; 8x8192 38.3-38.4
  // / 38.3-38.5 / 38.3, 42.5-42.9; 4x8192 26.9 / 27.0-27.1 / 26.0, 26.4-26.5).
  if (c.dec_heads == 2 && o.max_num_splits <= 0) c.dec_max_splits = kDecDefaultMaxSplits / 2;
  // One KV head (an MQA model, or a GQA model at tensor parallelism as wide
  // as its KV heads): 64 parts of a long request leave half the SMs idle,
  // so it may split up to kern::kMaxMergeTileParts ways, merged in a tree
  // (past 64 parts only where the longest range holds kMaxMergeTileParts
  // parts of kDecTreeMinKeys keys: the search in cuda_schedule).  H200, 8
  // query heads, kernel us (CUPTI), 64 /
  // 128 parts: 1x32768 16.5 / 15.5, 1x65536 22.7 / 19.2, 1x131072 34.9 /
  // 26.8, fp8 1x131072 37.0-37.2 / 24.3; 1x8192 (parts of 64 keys) 12.0 /
  // 12.9-13.1.  At 2 KV heads 96 or 128 parts lost (1x131072 40.9-41.0 ->
  // 42.0-42.3).
  if (c.dec_heads == 1 && o.num_kv_heads == 1 && o.max_num_splits <= 0) c.dec_max_splits = kern::kMaxMergeTileParts;
  if (const char *ck = std::getenv("VATTN_CUDA_DECODE_CTA_KEYS")) c.dec_cta_keys = std::max(0L, std::atol(ck));
  if (const char *mk = std::getenv("VATTN_CUDA_DECODE_MERGE_KEYS")) c.dec_merge_keys = std::max(0L, std::atol(mk));
  if (const char *mg = std::getenv("VATTN_CUDA_DECODE_MERGE_GROUP"))
    c.dec_merge_group = std::clamp(std::atoi(mg), 0, kern::kMaxSelfMergeParts);
  if (const char *mf = std::getenv("VATTN_CUDA_DECODE_MERGE_FLAT"))
    c.dec_merge_flat = std::clamp(std::atoi(mf), 1, kern::kMaxSelfMergeParts);
  cuda_size_plan(&c);
  return c;
}

void cuda_size_plan(CudaBuilderCfg *c) {
  const auto &o = c->o;
  const int64_t tiles_bound = o.max_num_tokens / c->tokens_per_tile + o.max_num_reqs + 2;
  c->cap_items = 2 * tiles_bound + 4LL * c->num_sms + 2LL * c->dec_slots + 64;
  c->ws_rows = std::max<int64_t>({static_cast<int64_t>(o.max_num_reqs) * c->max_splits,
                                  2 * std::min<int64_t>(o.max_num_tokens, 4096),
                                  c->decode ? 2LL * c->dec_slots : 0}) * c->group;
  c->cap_parts = c->ws_rows;
}

CudaPlanLayout cuda_plan_layout(const CudaBuilderCfg &c) {
  const auto &o = c.o;
  CudaPlanLayout L;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    size_t at = align_up(off, 256);
    off = at + bytes;
    return at;
  };
  L.header = take(8 * sizeof(int32_t));
  L.reqs = take(sizeof(kern::AttnReq) * (o.max_num_reqs + 1));
  L.items = take(sizeof(kern::AttnItem) * c.cap_items);
  L.tok_parts = take(sizeof(int2) * o.max_num_tokens);
  L.part_list = take(sizeof(int32_t) * c.cap_parts);
  L.block_table = take(sizeof(int32_t) * static_cast<size_t>(o.max_num_reqs) * o.max_blocks_per_req);
  L.slot_mapping = take(sizeof(int64_t) * o.max_num_tokens);
  // Arrival counters of self-merging decode tiles (at most one per item:
  // kern::self_merge_counters): zeroed at plan creation with the rest of
  // the metadata and never uploaded.
  L.merge_ctr = take(sizeof(int32_t) * static_cast<size_t>(c.cap_items) * o.num_kv_heads);
  L.unit_ctr = take(2 * sizeof(int32_t));  // zeroed, never uploaded, like merge_ctr
  L.units = take(sizeof(int32_t) * static_cast<size_t>(c.cap_items) * o.num_kv_heads);
  L.meta_end = align_up(off, 256);
  const size_t ws = static_cast<size_t>(c.ws_rows) * o.num_kv_heads;
  L.ws_lse = take(sizeof(float) * ws);
  L.ws_o = take(sizeof(float) * ws * o.head_size);
  L.total = align_up(off, 256);
  return L;
}

vattn_status_t cuda_schedule(const CudaBuilderCfg &c, const CudaPlanLayout &L, char *host,
                             const Metadata &md, int64_t P, bool capture,
                             CudaScheduleScratch *scratch, CudaSchedule *out) {
  using Tile = CudaScheduleScratch::Tile;
  using PartRef = CudaScheduleScratch::Part;
  const auto &o = c.o;
  const int G = c.group, tpt = c.tokens_per_tile;
  const int64_t nreq = md.num_reqs;
  const int64_t real = md.num_real_tokens();
  const int64_t ntok_out = md.num_actual_tokens;
  auto H = [host](size_t off) { return host + off; };

  kern::AttnReq *reqs = reinterpret_cast<kern::AttnReq *>(H(L.reqs));
  for (int64_t r = 0; r < nreq; ++r) {
    kern::AttnReq &q = reqs[r];
    q.q_start = md.query_start_loc[r];
    q.q_len = md.query_len(r);
    q.kv_len = md.seq_lens[r];
    q.q_pos0 = q.kv_len - q.q_len;
    q.bt_row = static_cast<int32_t>(r);
    q.kv_start = md.query_start_loc[r];
    q.causal = md.causal ? 1 : 0;
    q.pad_ = 0;
  }

  // ---- tiles
  std::vector<Tile> &tiles = scratch->tiles, &dtiles = scratch->dtiles;
  tiles.clear();
  dtiles.clear();
  bool cascade = P > 0 && md.causal && real > 0;
  if (cascade && 2 * real * G > c.ws_rows) cascade = false;  // fall back (see cuda_schedule.h)
  const int64_t kv_floor = cascade ? P : 0;
  const bool use_dec = c.decode && !cascade;
  for (int64_t r = 0; r < nreq; ++r) {
    const kern::AttnReq &q = reqs[r];
    if (use_dec && q.q_len >= 1 && q.q_len * G <= c.dec_rows) {
      int64_t hi = q.kv_len;
      if (q.causal) hi = std::min<int64_t>(hi, static_cast<int64_t>(q.q_pos0) + q.q_len);
      hi = std::max<int64_t>(hi, 0);
      // Fields stored in place: a braced temporary went through the stack
      // (4-byte stores, then a 16-byte reload: a failed store forward per
      // request; docs/benchmarks.md, host section, session 35).
      Tile &t = dtiles.emplace_back();
      t.req = static_cast<int32_t>(r);
      t.tok0 = 0;
      t.ntok = q.q_len;
      t.kv_lo = 0;
      t.kv_hi = static_cast<int32_t>(hi);
      t.kv_end = q.kv_len;
      continue;
    }
    for (int32_t t0 = 0; t0 < q.q_len; t0 += tpt) {
      const int32_t nt = std::min<int32_t>(tpt, q.q_len - t0);
      int64_t hi = q.kv_len;
      if (q.causal) hi = std::min<int64_t>(hi, static_cast<int64_t>(q.q_pos0) + t0 + nt);
      int64_t lo = std::min<int64_t>(kv_floor, hi);
      tiles.push_back(Tile{static_cast<int32_t>(r), t0, nt, static_cast<int32_t>(lo),
                           static_cast<int32_t>(std::max(lo, hi)), q.kv_len});
    }
  }
  if (cascade) {
    kern::AttnReq &v = reqs[nreq];
    v.q_start = 0;
    v.q_len = static_cast<int32_t>(real);
    v.q_pos0 = 0;
    v.kv_len = static_cast<int32_t>(P);
    v.bt_row = 0;
    v.kv_start = 0;
    v.causal = 0;
    v.pad_ = 0;
    for (int32_t t0 = 0; t0 < real; t0 += tpt) {
      const int32_t nt = std::min<int32_t>(tpt, static_cast<int32_t>(real) - t0);
      tiles.push_back(Tile{static_cast<int32_t>(nreq), t0, nt, 0, static_cast<int32_t>(P),
                           static_cast<int32_t>(P)});
    }
  }

  // Longest key ranges first: CTAs start in item order, so the causal
  // tiles near the diagonal end of long prompts do not form a tail.
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile &a, const Tile &b) {
    return a.kv_hi - a.kv_lo > b.kv_hi - b.kv_lo;
  });

  // ---- split-KV decision
  const int64_t base = static_cast<int64_t>(tiles.size() + dtiles.size()) * o.num_kv_heads;
  const int64_t target = 2LL * c.num_sms;
  int want = 1;
  if (!cascade && base > 0 && base < target)
    want = static_cast<int>(std::min<int64_t>(c.max_splits, (target + base - 1) / base));

  kern::AttnItem *items = reinterpret_cast<kern::AttnItem *>(H(L.items));
  int64_t n_items = 0, ws_next = 0;
  std::vector<PartRef> &parts = scratch->parts;
  parts.clear();
  std::vector<int64_t> &gen_keys = scratch->gen_keys;  // causal bound applied
  gen_keys.clear();
  // A partial of `ntok` tokens from tok_first for the merge pass: token k's
  // G workspace rows start at ws_next + k G; the partial takes ntok G rows.
  auto push_partial = [&](int32_t tok_first, int32_t ntok) {
    for (int32_t k = 0; k < ntok; ++k)
      parts.push_back(PartRef{tok_first + k, static_cast<int32_t>(ws_next + k * G)});
    ws_next += static_cast<int64_t>(ntok) * G;
  };
  for (const Tile &t : tiles) {
    const int32_t rows = t.ntok * G;
    const int64_t range = t.kv_hi - t.kv_lo;
    int64_t chunk = 0;
    int s = split_parts<kSplitAlign>(range, want, kMinKeysPerSplit, &chunk);
    const bool ws = s > 1 || cascade;
    if (ws && (ws_next + static_cast<int64_t>(s) * rows > c.ws_rows || n_items + s > c.cap_items)) {
      if (cascade)  // cannot happen: checked above; keep the invariant loud
        return fail(VATTN_ERR_INTERNAL, "cascade plan exceeds its workspace");
      s = 1;
      chunk = range;
    }
    if (n_items + s > c.cap_items)
      return fail(VATTN_ERR_INTERNAL, "plan item capacity %lld exceeded", (long long)c.cap_items);
    const bool use_ws = s > 1 || cascade;
    for (int i = 0; i < s; ++i) {
      kern::AttnItem &it = items[n_items++];
      it.req = t.req;
      it.q_row0 = t.tok0 * G;
      it.num_rows = rows;
      it.kv_begin = static_cast<int32_t>(t.kv_lo + i * chunk);
      // The last chunk runs to kv_len: a non-causal layer over causal
      // metadata (cross / encoder) still sees every key; causal rows are
      // clipped in the kernel.
      it.kv_end = i + 1 == s ? t.kv_end : static_cast<int32_t>(t.kv_lo + (i + 1) * chunk);
      it.ws_base = use_ws ? static_cast<int32_t>(ws_next) : -1;
      it.merge = it.merge_slot = 0;
      gen_keys.push_back(std::max<int64_t>(0, std::min<int64_t>(it.kv_end, t.kv_hi) - it.kv_begin));
      if (use_ws) push_partial(reqs[t.req].q_start + t.tok0, t.ntok);
    }
  }
  const int64_t n_gen = n_items;
  // The Hopper kernel's claim order of the general items' units.
  if (!unit_order(&items[0].req, sizeof(kern::AttnItem), gen_keys.data(), n_gen, o.num_kv_heads,
                  reinterpret_cast<int32_t *>(H(L.units))))
    return fail(VATTN_ERR_OUT_OF_MEMORY, "plan build: out of host memory");

  // ---- decode items: pick one split count s for the batch (each tile uses
  // min(s, range / min_keys) chunks) minimising the modelled time of
  // search_decode_splits, within the plan's workspace and item capacity;
  // ties go to fewer splits.
  int best_s = 1;
  if (c.dec_longest_first) order_longest_first(scratch);
  if (!dtiles.empty()) {
    // Parts shorter than kDecShortSplitKeys need CTAs that fit one per SM;
    // when one part per tile is already more, they are out (and the search
    // below stays as short as with kDecShortSplitKeys parts: host time).
    // Otherwise the search with kDecMinKeysPerSplit parts ends where a
    // tile's parts get short and the CTAs no longer fit, so a second search
    // with kDecShortSplitKeys parts (short tiles then stop splitting while
    // the long ones go on) keeps its count when it is cheaper.  H100, D128,
    // eager us, 3 rounds, one search -> both: bf16 8 x 2k-32k 223.2-223.6
    // -> 215.3-216.0 (5 -> 9 parts), 16 x 1k-16k 178.8-179.1 ->
    // 177.8-177.9 (4 -> 5), 16 x 1k-4k 60.4-60.7 -> 60.6-60.9 (3 -> 5); fp8
    // (with its CTA keys doubled, cuda_create_builder) 16 x 1k-16k
    // 119.9-120.2 -> 106.3-106.5 (4 -> 8), 8 x 2k-32k 119.8-120.1 -> 122.1-122.3
    // (8 -> 16); equal contexts keep their count.
    int64_t max_range = 0;
    for (const Tile &t : dtiles) max_range = std::max<int64_t>(max_range, t.kv_hi - t.kv_lo);
    auto search = [&](int64_t mk, int64_t *cost) {
      int64_t cap = std::max<int64_t>(1, std::min<int64_t>(c.dec_max_splits, max_range / mk));
      // Past kMaxSelfMergeParts parts (tree merges) only for a range that
      // fills kMaxMergeTileParts parts of kDecTreeMinKeys keys: 70 parts of
      // 1x20000 lost to 64 (H200, 1 KV head, kernel 15.13 -> 15.47 us).
      if (cap > kern::kMaxSelfMergeParts && max_range < kern::kMaxMergeTileParts * kDecTreeMinKeys)
        cap = kern::kMaxSelfMergeParts;
      const int s_cap = static_cast<int>(cap);
      return search_decode_splits(c, dtiles, c.dec_longest_first, mk, s_cap, c.cap_items - n_items,
                                  c.ws_rows - ws_next, &scratch->dec_buckets, cost);
    };
    const int64_t min_ctas = static_cast<int64_t>(dtiles.size()) * (o.num_kv_heads / c.dec_heads);
    int64_t min_keys = min_ctas <= c.num_sms ? kDecMinKeysPerSplit : kDecShortSplitKeys;
    int64_t cost = 0;
    best_s = search(min_keys, &cost);
    if (min_keys < kDecShortSplitKeys) {
      int64_t cost_long = 0;
      const int s_long = search(kDecShortSplitKeys, &cost_long);
      if (cost_long < cost) {
        best_s = s_long;
        min_keys = kDecShortSplitKeys;
      }
    }
    if (n_items + static_cast<int64_t>(dtiles.size()) > c.cap_items)
      return fail(VATTN_ERR_INTERNAL, "plan item capacity %lld exceeded", (long long)c.cap_items);
    int32_t merge_slot = 0;
    for (const Tile &t : dtiles) {
      int64_t chunk = 0;
      const int s = decode_parts(t.kv_hi - t.kv_lo, best_s, min_keys, &chunk);
      const int32_t rows = t.ntok * G;
      // Split tiles merge themselves in the kernel (the last CTA to finish
      // combines the partials, or a tree of groups): no merge pass for
      // their tokens.
      const bool self_merge = s > 1 && s <= kern::kMaxMergeTileParts;
      int merge_group = s <= c.dec_merge_flat || c.dec_merge_group < 2 ? s : c.dec_merge_group;
      // A merge step combines at most kMaxSelfMergeParts partials.
      if (merge_group > kern::kMaxSelfMergeParts ||
          (merge_group < s && (s + merge_group - 1) / merge_group > kern::kMaxSelfMergeParts))
        merge_group = kDecMergeGroup;
      for (int i = 0; i < s; ++i) {
        kern::AttnItem &it = items[n_items++];
        it.req = t.req;
        it.q_row0 = 0;
        it.num_rows = rows;
        it.kv_begin = static_cast<int32_t>(t.kv_lo + i * chunk);
        it.kv_end = i + 1 == s ? t.kv_end : static_cast<int32_t>(t.kv_lo + (i + 1) * chunk);
        it.ws_base = s > 1 ? static_cast<int32_t>(ws_next) : -1;
        it.merge = self_merge ? kern::self_merge_word(s, i, merge_group) : 0;
        it.merge_slot = self_merge ? merge_slot : 0;
        if (self_merge) {
          ws_next += rows;
        } else if (s > 1) {
          push_partial(reqs[t.req].q_start, t.ntok);
        }
      }
      if (self_merge) merge_slot += kern::self_merge_counters(s, merge_group);
    }
  }

  if (static_cast<int64_t>(parts.size()) > c.cap_parts)
    return fail(VATTN_ERR_INTERNAL, "plan part capacity exceeded");
  // The merge pass runs when parts or padding rows exist, and always in a
  // captured graph; without it its tables are never read (a prefill or
  // decode batch without plan-level splits skips two passes over its tokens).
  const bool merge_pass = capture || !parts.empty() || ntok_out > real;
  if (merge_pass) {
    // Counting sort of the parts by token: tok_parts[t] = {first, count},
    // then cnt[t] is token t's fill cursor into part_list.
    int2 *tok_parts = reinterpret_cast<int2 *>(H(L.tok_parts));
    int32_t *part_list = reinterpret_cast<int32_t *>(H(L.part_list));
    std::vector<int32_t> &cnt = scratch->cnt;
    cnt.assign(static_cast<size_t>(std::max<int64_t>(ntok_out, real)), 0);
    for (const PartRef &pr : parts) ++cnt[pr.tok];
    int32_t at = 0;
    for (size_t t = 0; t < cnt.size(); ++t) {
      const int32_t n = cnt[t];
      if (static_cast<int64_t>(t) < ntok_out)
        tok_parts[t] = static_cast<int64_t>(t) < real ? int2{at, n} : int2{0, -1};
      cnt[t] = at;
      at += n;
    }
    for (const PartRef &pr : parts) part_list[cnt[pr.tok]++] = pr.p;
  }

  int32_t *hdr = reinterpret_cast<int32_t *>(H(L.header));
  hdr[0] = static_cast<int32_t>(n_items);
  hdr[1] = static_cast<int32_t>(ntok_out);
  hdr[2] = static_cast<int32_t>(md.slot_mapping.size());
  hdr[3] = static_cast<int32_t>(n_gen);
  for (int i = 4; i < 8; ++i) hdr[i] = 0;

  // Block table: the blocks each request reads, ceil(seq_len / block_size)
  // (kernels never use an entry past them; the cascade pass reads row 0's
  // first P keys), not whole rows: a serving engine's table is as wide as
  // its longest possible request.  `width` is the widest such prefix.
  int32_t *bt = reinterpret_cast<int32_t *>(H(L.block_table));
  const int64_t cols = std::min<int64_t>(md.block_table_cols, o.max_blocks_per_req);
  int64_t width = 0;
  const uint32_t bs = static_cast<uint32_t>(o.block_size);
  for (int64_t r = 0; r < nreq; ++r) {
    const uint32_t need = (static_cast<uint32_t>(md.seq_lens[r]) + bs - 1) / bs;  // 32-bit: see decode_parts
    const int64_t used = std::min<int64_t>(cols, static_cast<int64_t>(need));
    std::memcpy(bt + r * o.max_blocks_per_req, md.block_row(r), sizeof(int32_t) * used);
    width = std::max(width, used);
  }
  if (!md.slot_mapping.empty())
    std::memcpy(H(L.slot_mapping), md.slot_mapping.data(), sizeof(int64_t) * md.slot_mapping.size());

  out->n_items = n_items;
  out->n_gen = n_gen;
  out->n_parts = static_cast<int64_t>(parts.size());
  out->n_reqs = nreq + (cascade ? 1 : 0);
  out->ntok_out = ntok_out;
  out->bt_width = width;
  out->cascade = cascade;
  out->merge_pass = merge_pass;
  out->dec_splits = best_s;
  return VATTN_OK;
}

}  // namespace vattn
