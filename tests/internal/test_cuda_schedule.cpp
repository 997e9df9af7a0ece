// test_cuda_schedule.cpp -- the CUDA builder's host schedule
// (src/backends/cuda/cuda_schedule.h) on random batches, without a GPU:
// every token's keys are covered once by its items, split parts have
// disjoint workspace rows and reach the merge tables, the unit order is a
// permutation, the staged block table and slot mapping are the caller's,
// the decode tiles come in the order asked for, and the decode split count
// is the one a plain search of the cost model (restated here) picks; the
// model's cost keys per cache kind, and the split counts of the shapes whose
// measurements chose them.  Built only with the CUDA backend.
#include <gtest/gtest.h>

#ifdef VATTN_WITH_CUDA

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "../metadata/md_util.h"
#include "backends/cuda/cuda_schedule.h"
#include "metadata/metadata.h"

namespace {

using vattn::CudaBuilderCfg;
namespace kern = vattn::kern;

struct Batch {
  std::vector<int32_t> qsl{0}, seq_lens, table;
  std::vector<int64_t> slots;
  int64_t cols = 0, ntok_out = 0;
  bool causal = true;
};

// The cost model of cuda_schedule.cpp, restated: one split count s for all
// decode tiles, parts of >= min_keys keys, chunks aligned to 16 keys, parts
// under 256 keys only while the CTAs fit one per SM, cost min(equal parts'
// bound, work per saturating slot + tail + CTA keys) + a merge round past 16
// parts (the S < R terms, the tail and the warp rounds of dec_rounds: see
// below); the smallest cost wins, ties to fewer splits; stop at the first s
// past the item / workspace capacity.  plain_decode_splits picks min_keys
// as the builder does.
int plain_decode_search(const CudaBuilderCfg &c, const std::vector<int64_t> &ranges,
                        const std::vector<int64_t> &rows, int64_t items_before, int64_t ws_before,
                        int64_t min_keys, int64_t *cost_out) {
  // ranges / rows: the decode tiles in the order the builder lists them.
  const int64_t heads = c.o.num_kv_heads / c.dec_heads;
  auto split = [&](int64_t range, int64_t s, int64_t *chunk) {
    int64_t st = std::min(s, std::max<int64_t>(1, range / min_keys));
    *chunk = range;
    if (st > 1) {
      *chunk = (range + st - 1) / st;
      *chunk = (*chunk + 15) / 16 * 16;
      st = (range + *chunk - 1) / *chunk;
    }
    return st;
  };
  int64_t max_range = 0;
  for (int64_t r : ranges) max_range = std::max(max_range, r);
  int64_t s_cap = std::max<int64_t>(1, std::min<int64_t>(c.dec_max_splits, max_range / min_keys));
  if (s_cap > 64 && max_range < 128 * 256)  // past 64 parts (a tree merge): ranges of 128 parts of 256 keys
    s_cap = 64;
  int best = 1;
  int64_t best_cost = -1;
  for (int64_t s = 1; s <= s_cap; ++s) {
    int64_t items = 0, ws = 0, longest = 0, parts = 1;
    bool short_parts = false;
    for (size_t i = 0; i < ranges.size(); ++i) {
      int64_t chunk;
      const int64_t st = split(ranges[i], s, &chunk);
      items += st;
      if (st > 1) ws += st * rows[i];
      longest = std::max(longest, chunk);
      parts = std::max(parts, st);
      if (st > 1 && chunk < 256) short_parts = true;
    }
    if (s > 1 && (items_before + items > c.cap_items || ws_before + ws > c.ws_rows)) break;
    const int64_t ctas = items * heads;
    if (short_parts && ctas > c.num_sms) continue;
    // Waves of equal parts, or every slot busy until the work runs out and
    // then one more part: the longest; with more parts than one round of
    // slots, tiles longest first: the first part of the second round (up to
    // two rounds) or the last part; request order: a part of mean length.
    const int64_t waves = (ctas + c.dec_slots - 1) / c.dec_slots;
    // The longest part counts whole rounds of the CTA's 4 warps (64 keys)
    // with dec_rounds >= 1 in plans of more than one wave where it has 512
    // keys or more, and with dec_rounds 2 also where it has 256-1023 keys.
    if ((c.dec_rounds >= 1 && waves > 1 && longest >= 512) || (c.dec_rounds >= 2 && longest >= 256 && longest < 1024))
      longest = (longest + 63) / 64 * 64;
    // S of the R resident CTAs keep the memory busy: with more at once each
    // runs at S / (CTAs running).
    const int64_t R = c.dec_slots, S = c.dec_sat_slots > 0 ? std::min<int64_t>(c.dec_sat_slots, R) : R;
    int64_t keys = 0;
    for (int64_t r : ranges) keys += r;
    const int64_t per_slot = (heads * (keys + items * c.dec_cta_keys) + S - 1) / S;
    const int64_t round = (c.dec_slots + heads - 1) / heads;  // parts per round of slots
    int64_t tail = longest;
    if (c.dec_longest_first && items > round) {
      std::vector<int64_t> chunks;  // every part's chunk, in item order
      for (int64_t r : ranges) {
        int64_t chunk;
        const int64_t st = split(r, s, &chunk);
        for (int64_t i = 0; i < st; ++i) chunks.push_back(chunk);
      }
      tail = items < 2 * round ? chunks[round] : chunks.back();
    } else if (items > round) {
      tail = (keys + items - 1) / items;  // request order: the mean part
    }
    // An SM's CTAs share its part of the bandwidth: S / num_sms of them use
    // it fully, and the most loaded SM sets the pace of equal parts.
    const int64_t k = std::max<int64_t>(1, S / c.num_sms), sm_load = (ctas + c.num_sms - 1) / c.num_sms;
    const int64_t one = longest + c.dec_cta_keys;  // the longest part alone
    int64_t equal = one * std::max(waves * k, sm_load) / k;
    // Lone CTAs: alone on their SMs they stream at the SM's whole share
    // (where the tile stays whole, splits 8 or more ways, or the part has
    // 4096 keys or more); every wave past the first pays a CTA's cost.
    if (c.dec_lone) {
      if (ctas <= c.num_sms && 2 * ctas > c.num_sms && (parts == 1 || parts >= 8 || longest >= 4096))
        equal = (longest + 1) / 2 + c.dec_cta_keys;
      equal += (waves - 1) * c.dec_cta_keys;
    }
    int64_t mixed = per_slot + tail + c.dec_cta_keys;
    if (S < R) mixed = std::max(mixed, one * std::max(std::min(sm_load, R / c.num_sms), k) / k);
    const int64_t cost = std::min(equal, mixed) + (parts > 16 ? c.dec_merge_keys : 0) +
                         (S < R && s > 1 ? c.dec_cta_keys : 0);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best = static_cast<int>(s);
    }
  }
  *cost_out = best_cost;
  return best;
}
// 64-key parts while one part per tile fits the SMs, and then also 256-key
// parts, whose count wins when it is cheaper.
int plain_decode_splits(const CudaBuilderCfg &c, const std::vector<int64_t> &ranges,
                        const std::vector<int64_t> &rows, int64_t items_before, int64_t ws_before) {
  const int64_t heads = c.o.num_kv_heads / c.dec_heads;
  int64_t cost = 0, cost_long = 0;
  if (static_cast<int64_t>(ranges.size()) * heads > c.num_sms)
    return plain_decode_search(c, ranges, rows, items_before, ws_before, 256, &cost);
  const int s = plain_decode_search(c, ranges, rows, items_before, ws_before, 64, &cost);
  const int s_long = plain_decode_search(c, ranges, rows, items_before, ws_before, 256, &cost_long);
  return cost_long < cost ? s_long : s;
}

CudaBuilderCfg make_cfg(std::mt19937 &g) {
  CudaBuilderCfg c;
  vattn_builder_options_init(&c.o);
  const int kvh = std::uniform_int_distribution<int>(1, 8)(g);
  const int grp[] = {1, 2, 4, 8};
  const int G = grp[g() % 4];
  c.o.num_kv_heads = kvh;
  c.o.num_heads = kvh * G;
  c.o.head_size = 128;
  c.o.block_size = 16;
  c.o.max_num_reqs = 48;
  c.o.max_num_tokens = 2048;
  c.o.max_blocks_per_req = 400;
  const int sms[] = {4, 16, 132};
  c.num_sms = sms[g() % 3];
  c.max_splits = 16;
  c.decode = g() % 8 != 0;
  c.dec_heads = (kvh % 2 == 0 && G <= 8 && g() % 3 == 0) ? 2 : 1;
  c.dec_rows = 16 / c.dec_heads;
  c.dec_slots = c.num_sms * (1 + static_cast<int>(g() % 4));
  c.dec_sat_slots = g() % 2 ? std::min<int32_t>(c.dec_slots, 2 * c.num_sms) : 0;  // 16-bit / fp8 cache
  c.dec_lone = c.dec_sat_slots > 0 && g() % 2 != 0;
  c.dec_rounds = static_cast<int32_t>(g() % 3);
  c.dec_max_splits = c.dec_heads == 2 ? 32 : kvh == 1 && g() % 2 ? 128 : 64;  // 128: trees past 64 parts
  c.dec_longest_first = g() % 2 != 0;
  const int merge_groups[] = {0, 2, 3, 8};  // 0: always flat
  c.dec_merge_group = merge_groups[g() % 4];
  c.dec_merge_flat = 1 + static_cast<int32_t>(g() % 24);
  c.group = G;
  c.tokens_per_tile = 128 / G;
  vattn::cuda_size_plan(&c);
  return c;
}

Batch make_batch(std::mt19937 &g, const CudaBuilderCfg &c, int64_t num_blocks) {
  Batch b;
  const int G = c.group;
  const int nreq = std::uniform_int_distribution<int>(1, 40)(g);
  const bool long_ctx = g() % 2 == 0;
  int64_t tokens = 0;
  for (int r = 0; r < nreq; ++r) {
    int32_t q;
    if (g() % 5 < 3) {
      q = std::uniform_int_distribution<int32_t>(1, std::max(1, 16 / G))(g);
    } else {
      q = std::uniform_int_distribution<int32_t>(1, 200)(g);
    }
    if (tokens + q > 1500) q = 1;
    tokens += q;
    const int32_t ctx = std::uniform_int_distribution<int32_t>(0, long_ctx ? 6000 : 700)(g);
    b.seq_lens.push_back(ctx + q);
    b.qsl.push_back(b.qsl.back() + q);
  }
  int64_t need = 1;
  for (int32_t s : b.seq_lens) need = std::max<int64_t>(need, (s + 15) / 16);
  b.cols = need + static_cast<int64_t>(g() % 5);
  b.table.resize(static_cast<size_t>(nreq * b.cols));
  for (auto &e : b.table) e = static_cast<int32_t>(g() % num_blocks);
  for (int r = 0; r < nreq; ++r)
    for (int32_t t = b.qsl[r]; t < b.qsl[r + 1]; ++t) {
      const int32_t pos = b.seq_lens[r] - (b.qsl[r + 1] - t);
      b.slots.push_back(int64_t(b.table[r * b.cols + pos / 16]) * 16 + pos % 16);
    }
  b.ntok_out = b.qsl.back() + (g() % 3 == 0 ? static_cast<int64_t>(g() % 9) : 0);
  b.causal = g() % 6 != 0;
  return b;
}

TEST(CudaSchedule, RandomBatchesCoverEveryKeyOnce) {
  std::mt19937 g(20261123);
  const int64_t num_blocks = 100000;
  int cascades = 0, splits = 0, self_merges = 0, grouped_merges = 0, merge_parts = 0;
  for (int trial = 0; trial < 800; ++trial) {
    SCOPED_TRACE(trial);
    const CudaBuilderCfg c = make_cfg(g);
    const Batch b = make_batch(g, c, num_blocks);
    const int G = c.group, KVH = c.o.num_kv_heads;
    const int64_t nreq = static_cast<int64_t>(b.seq_lens.size());
    vattn_metadata_desc_t d;
    vattn_metadata_desc_init(&d);
    d.num_reqs = nreq;
    d.num_actual_tokens = b.ntok_out;
    d.query_start_loc = b.qsl.data();
    d.seq_lens = b.seq_lens.data();
    d.block_table = b.table.data();
    d.block_table_rows = nreq;
    d.block_table_cols = b.cols;
    d.slot_mapping = b.slots.data();
    d.slot_mapping_len = static_cast<int64_t>(b.slots.size());
    d.block_size = 16;
    d.num_cache_blocks = num_blocks;
    d.causal = b.causal ? 1 : 0;
    vattn::Metadata md;
    ASSERT_EQ(vattn::metadata_from_desc(d, "desc", &md), VATTN_OK) << vattn_last_error_message();
    // A common prefix (cascade) on a third of the causal batches: a multiple
    // of the block size no longer than any request's context.
    int64_t P = 0;
    if (b.causal && trial % 3 == 0) {
      int64_t min_ctx = INT32_MAX;
      for (int64_t r = 0; r < nreq; ++r)
        min_ctx = std::min<int64_t>(min_ctx, b.seq_lens[r] - (b.qsl[r + 1] - b.qsl[r]));
      P = min_ctx / 16 * 16;
    }
    const bool capture = trial % 7 == 0;

    const vattn::CudaPlanLayout L = vattn::cuda_plan_layout(c);
    std::vector<char> host(L.meta_end);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<char>(0xA5);  // poison
    vattn::CudaScheduleScratch scratch;
    vattn::CudaSchedule sc;
    ASSERT_EQ(vattn::cuda_schedule(c, L, host.data(), md, P, capture, &scratch, &sc), VATTN_OK)
        << vattn_last_error_message();
    // A second schedule with the warm scratch writes the same tables.
    std::vector<char> again(L.meta_end, static_cast<char>(0x5A));
    vattn::CudaSchedule sc2;
    ASSERT_EQ(vattn::cuda_schedule(c, L, again.data(), md, P, capture, &scratch, &sc2), VATTN_OK);
    EXPECT_EQ(sc2.n_items, sc.n_items);

    auto at = [&](size_t off) { return host.data() + off; };
    const int32_t *hdr = reinterpret_cast<const int32_t *>(at(L.header));
    const auto *reqs = reinterpret_cast<const kern::AttnReq *>(at(L.reqs));
    const auto *items = reinterpret_cast<const kern::AttnItem *>(at(L.items));
    ASSERT_EQ(hdr[0], sc.n_items);
    ASSERT_EQ(hdr[3], sc.n_gen);
    ASSERT_EQ(hdr[1], b.ntok_out);
    ASSERT_EQ(hdr[2], static_cast<int32_t>(b.slots.size()));
    ASSERT_LE(sc.n_items, c.cap_items);
    EXPECT_EQ(std::memcmp(again.data() + L.items, host.data() + L.items,
                          sizeof(kern::AttnItem) * static_cast<size_t>(sc.n_items)), 0);
    const bool cascade = sc.cascade;
    EXPECT_EQ(cascade, P > 0);  // the workspace holds both passes at these sizes
    cascades += cascade;
    ASSERT_EQ(sc.n_reqs, nreq + (cascade ? 1 : 0));
    for (int64_t r = 0; r < nreq; ++r) {
      const int32_t q = b.qsl[r + 1] - b.qsl[r];
      EXPECT_EQ(reqs[r].q_start, b.qsl[r]);
      EXPECT_EQ(reqs[r].q_len, q);
      EXPECT_EQ(reqs[r].kv_len, b.seq_lens[r]);
      EXPECT_EQ(reqs[r].q_pos0, b.seq_lens[r] - q);
      EXPECT_EQ(reqs[r].bt_row, r);
      EXPECT_EQ(reqs[r].causal, b.causal ? 1 : 0);
    }
    if (cascade) {
      EXPECT_EQ(reqs[nreq].q_len, b.qsl.back());
      EXPECT_EQ(reqs[nreq].kv_len, P);
      EXPECT_EQ(reqs[nreq].bt_row, 0);
      EXPECT_EQ(reqs[nreq].causal, 0);
    }

    // Coverage: per (request, first row), the items' key ranges tile
    // [lo, kv_len) in order; every token of every request has one such tile
    // (two with cascade: the prefix pass and its own).
    std::map<std::pair<int32_t, int32_t>, std::vector<const kern::AttnItem *>> tiles;
    std::vector<int32_t> ws_owner(static_cast<size_t>(c.ws_rows), -1);
    for (int64_t i = 0; i < sc.n_items; ++i) {
      const kern::AttnItem &it = items[i];
      ASSERT_GE(it.req, 0);
      ASSERT_LT(it.req, sc.n_reqs);
      ASSERT_GT(it.num_rows, 0);
      ASSERT_EQ(it.num_rows % G, 0);
      ASSERT_EQ(it.q_row0 % G, 0);
      ASSERT_LE(it.q_row0 + it.num_rows, reqs[it.req].q_len * G);
      ASSERT_LE(it.kv_begin, it.kv_end);
      if (i >= sc.n_gen) {
        ASSERT_EQ(it.q_row0, 0);
        ASSERT_EQ(it.num_rows, reqs[it.req].q_len * G);
        ASSERT_LE(it.num_rows, c.dec_rows);
        ASSERT_EQ(it.kv_begin % 16, 0);
      } else {
        ASSERT_LE(it.num_rows, c.tokens_per_tile * G);
        ASSERT_EQ((it.kv_begin - (it.req < nreq && cascade ? P : 0)) % 64, 0);
      }
      if (it.ws_base >= 0)  // workspace rows of distinct items never overlap
        for (int32_t k = 0; k < it.num_rows; ++k) {
          ASSERT_LT(it.ws_base + k, c.ws_rows);
          ASSERT_EQ(ws_owner[it.ws_base + k], -1) << "item " << i;
          ws_owner[it.ws_base + k] = static_cast<int32_t>(i);
        }
      tiles[{it.req, it.q_row0}].push_back(&it);
    }
    std::vector<int> tok_tiles(static_cast<size_t>(b.qsl.back()), 0);
    std::set<int32_t> ctr_owner;
    for (auto &kv : tiles) {
      auto &v = kv.second;
      std::sort(v.begin(), v.end(), [](auto *x, auto *y) { return x->kv_begin < y->kv_begin; });
      const int32_t r = kv.first.first;
      const bool prefix_pass = r == nreq;
      const int32_t lo = prefix_pass ? 0 : static_cast<int32_t>(cascade ? P : 0);
      const int32_t hi = prefix_pass ? static_cast<int32_t>(P) : b.seq_lens[r];
      EXPECT_EQ(v.front()->kv_begin, std::min(lo, hi));
      EXPECT_EQ(v.back()->kv_end, hi);
      const int s = static_cast<int>(v.size());
      for (int i = 0; i < s; ++i) {
        EXPECT_EQ(v[i]->num_rows, v[0]->num_rows);
        if (i > 0) {
          EXPECT_EQ(v[i]->kv_begin, v[i - 1]->kv_end);
        }
        // One part writes the output; split (or cascade) parts write partials.
        EXPECT_EQ(v[i]->ws_base >= 0, s > 1 || cascade);
        if (v[i]->merge) {
          EXPECT_EQ(kern::self_merge_parts(v[i]->merge), s);
          EXPECT_EQ(kern::self_merge_index(v[i]->merge), i);
          EXPECT_EQ(kern::self_merge_group(v[i]->merge), kern::self_merge_group(v[0]->merge));
          EXPECT_EQ(v[i]->merge_slot, v[0]->merge_slot);
          // The workspace rows of a tile's parts follow each other (the
          // kernel finds part j at ws_base + (j - index) rows).
          EXPECT_EQ(v[i]->ws_base, v[0]->ws_base + i * v[0]->num_rows);
        }
      }
      if (v[0]->merge) {  // the tile's arrival counters: its own, in the plan's range
        const int group = kern::self_merge_group(v[0]->merge);
        int want_group = s <= c.dec_merge_flat || c.dec_merge_group < 2 ? s : c.dec_merge_group;
        if (want_group > kern::kMaxSelfMergeParts ||
            (want_group < s && (s + want_group - 1) / want_group > kern::kMaxSelfMergeParts))
          want_group = vattn::kDecMergeGroup;
        want_group = std::min(want_group, s);
        EXPECT_LE((s + want_group - 1) / want_group, kern::kMaxSelfMergeParts);  // each step's partials
        EXPECT_LE(want_group, kern::kMaxSelfMergeParts);
        EXPECT_EQ(group, want_group) << "parts " << s;
        grouped_merges += group < s;
        const int n = kern::self_merge_counters(s, group);
        EXPECT_LE(n, s);
        for (int k = 0; k < n; ++k) {
          const int32_t slot = v[0]->merge_slot + k;
          ASSERT_GE(slot, 0);
          ASSERT_LT(slot, c.cap_items);
          ASSERT_TRUE(ctr_owner.insert(slot).second) << "counter " << slot << " of two tiles";
        }
      }
      splits += s > 1;
      self_merges += v[0]->merge != 0;
      if (!prefix_pass) {
        const int32_t t0 = reqs[r].q_start + v[0]->q_row0 / G;
        for (int32_t k = 0; k < v[0]->num_rows / G; ++k) ++tok_tiles[t0 + k];
      }
    }
    for (size_t t = 0; t < tok_tiles.size(); ++t) ASSERT_EQ(tok_tiles[t], 1) << "token " << t;

    // Merge tables: a token's parts are the workspace rows of its split,
    // not self-merging items (+ its row offset in the item).
    EXPECT_EQ(sc.merge_pass, capture || sc.n_parts > 0 || b.ntok_out > b.qsl.back());
    std::vector<std::vector<int32_t>> want(static_cast<size_t>(b.qsl.back()));
    for (int64_t i = 0; i < sc.n_items; ++i) {
      const kern::AttnItem &it = items[i];
      if (it.ws_base < 0 || it.merge) continue;
      const int32_t t0 = (it.req == nreq ? 0 : reqs[it.req].q_start) + it.q_row0 / G;
      for (int32_t k = 0; k < it.num_rows / G; ++k) want[t0 + k].push_back(it.ws_base + k * G);
    }
    if (sc.merge_pass) {
      const int2 *tp = reinterpret_cast<const int2 *>(at(L.tok_parts));
      const int32_t *pl = reinterpret_cast<const int32_t *>(at(L.part_list));
      for (int64_t t = 0; t < b.ntok_out; ++t) {
        if (t >= b.qsl.back()) {
          EXPECT_EQ(tp[t].y, -1);
          continue;
        }
        std::vector<int32_t> got(pl + tp[t].x, pl + tp[t].x + tp[t].y);
        std::sort(got.begin(), got.end());
        std::sort(want[t].begin(), want[t].end());
        ASSERT_EQ(got, want[t]) << "token " << t;
        merge_parts += tp[t].y;
      }
    } else {
      for (auto &w : want) ASSERT_TRUE(w.empty());
    }

    // Unit order: a permutation of the general items' units.
    const int32_t *units = reinterpret_cast<const int32_t *>(at(L.units));
    std::vector<int32_t> u(units, units + sc.n_gen * KVH);
    std::sort(u.begin(), u.end());
    for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(u[i], static_cast<int32_t>(i));

    // Block-table prefixes and the slot mapping.
    const int32_t *bt = reinterpret_cast<const int32_t *>(at(L.block_table));
    int64_t width = 0;
    for (int64_t r = 0; r < nreq; ++r) {
      const int64_t n = (b.seq_lens[r] + 15) / 16;
      width = std::max(width, n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(bt[r * c.o.max_blocks_per_req + j], b.table[r * b.cols + j]);
    }
    EXPECT_EQ(sc.bt_width, width);
    EXPECT_EQ(std::memcmp(at(L.slot_mapping), b.slots.data(), sizeof(int64_t) * b.slots.size()), 0);

    // Decode tiles (runs of items of one request): longest key range first
    // with ties in request order when the builder asks for it, else in
    // request order.
    {
      std::vector<std::pair<int32_t, int32_t>> dt;  // (range, request) per tile, in item order
      for (int64_t i = sc.n_gen; i < sc.n_items; ++i)
        if (dt.empty() || dt.back().second != items[i].req)
          dt.emplace_back(reqs[items[i].req].kv_len, items[i].req);
      for (size_t i = 1; i < dt.size(); ++i) {
        if (c.dec_longest_first) {
          ASSERT_TRUE(dt[i].first < dt[i - 1].first ||
                      (dt[i].first == dt[i - 1].first && dt[i].second > dt[i - 1].second))
              << "decode tile " << i;
        } else {
          ASSERT_GT(dt[i].second, dt[i - 1].second) << "decode tile " << i;
        }
      }
    }

    // The decode split count against the plain search.
    if (sc.n_items > sc.n_gen) {
      std::vector<int64_t> ranges, rows;
      int64_t ws_gen = 0;
      for (int64_t i = 0; i < sc.n_gen; ++i)
        if (items[i].ws_base >= 0) ws_gen += items[i].num_rows;
      std::vector<std::pair<int64_t, int64_t>> dec;  // (range, request)
      for (int64_t r = 0; r < nreq; ++r) {
        const int32_t q = b.qsl[r + 1] - b.qsl[r];
        if (c.decode && !cascade && q * G <= c.dec_rows) dec.emplace_back(b.seq_lens[r], r);  // every key
      }
      if (c.dec_longest_first)
        std::stable_sort(dec.begin(), dec.end(), [](auto &x, auto &y) { return x.first > y.first; });
      for (auto &d : dec) {
        ranges.push_back(d.first);
        rows.push_back((b.qsl[d.second + 1] - b.qsl[d.second]) * G);
      }
      EXPECT_EQ(sc.dec_splits, plain_decode_splits(c, ranges, rows, sc.n_gen, ws_gen));
    }
  }
  // The batches reached every path.
  EXPECT_GT(cascades, 20);
  EXPECT_GT(splits, 50);
  EXPECT_GT(self_merges, 20);
  EXPECT_GT(grouped_merges, 5);
  EXPECT_GT(merge_parts, 100);
}

// The cost keys per cache kind and head size (cuda_decode_cost_keys).
TEST(CudaSchedule, DecodeCostKeysPerCacheKind) {
  struct Case {
    int32_t cache, head_size;
    int64_t cta, merge;
  } cases[] = {
      {kern::kCacheAuto, 64, 128, 256},  {kern::kCacheAuto, 128, 256, 256}, {kern::kCacheAuto, 256, 256, 256},
      {kern::kCacheE4M3, 64, 256, 128}, {kern::kCacheE4M3, 128, 256, 128}, {kern::kCacheE5M2, 256, 256, 128},
  };
  for (const Case &k : cases) {
    int64_t cta = -1, merge = -1;
    vattn::cuda_decode_cost_keys(k.cache, k.head_size, &cta, &merge);
    EXPECT_EQ(cta, k.cta) << "cache " << k.cache << ", head size " << k.head_size;
    EXPECT_EQ(merge, k.merge) << "cache " << k.cache << ", head size " << k.head_size;
  }
}

// The builder's configuration on an H100 or H200 (132 SMs, two resident
// decode CTAs per SM, the Hopper kernel's 128-row items): G query heads
// per KV head, head size 128, block size 16.
CudaBuilderCfg hopper_cfg(bool fp8, int kv_heads, int G = 4) {
  vattn_builder_options_t o;
  vattn_builder_options_init(&o);
  o.num_heads = G * kv_heads;
  o.num_kv_heads = kv_heads;
  o.head_size = 128;
  o.block_size = 16;
  o.max_num_reqs = 256;
  o.max_num_tokens = 8192;
  o.max_blocks_per_req = 4096;
  o.kv_cache_dtype = fp8 ? VATTN_KV_CACHE_DTYPE_FP8_E4M3 : VATTN_KV_CACHE_DTYPE_AUTO;
  vattn::CudaDeviceFacts d;
  d.num_sms = 132;
  d.rows_per_tile = 128;
  d.dec_ctas_per_sm = 2;
  return vattn::cuda_builder_cfg(o, d);
}

// The schedule of one decode token per request over contexts `lens`, into
// *host (the plan's metadata part, laid out by cuda_plan_layout(c)).
vattn::CudaSchedule decode_schedule(const CudaBuilderCfg &c, const std::vector<int32_t> &lens,
                                    std::vector<char> *host) {
  const std::vector<int32_t> qlens(lens.size(), 1);
  std::mt19937_64 g(7);
  const mdt::Batch b = mdt::make_batch(g, qlens, lens, 16);
  vattn::Metadata md;
  EXPECT_EQ(vattn::metadata_from_desc(b.desc(), "desc", &md), VATTN_OK) << vattn_last_error_message();
  const vattn::CudaPlanLayout L = vattn::cuda_plan_layout(c);
  host->assign(L.meta_end, 0);
  vattn::CudaScheduleScratch scratch;
  vattn::CudaSchedule sc;
  EXPECT_EQ(vattn::cuda_schedule(c, L, host->data(), md, 0, false, &scratch, &sc), VATTN_OK)
      << vattn_last_error_message();
  return sc;
}

// The split counts behind the measurements quoted in cuda_schedule.cpp
// (the builder's configuration on an H100 or H200: 132 SMs, two resident
// decode CTAs per SM; 32 query / 8 KV heads unless noted, head size 128,
// block size 16).  A change of the
// model that moves one of these moves a measured choice: re-measure it.
TEST(CudaSchedule, DecodeSplitsOfMeasuredShapes) {
  // One decode token per request; contexts lo + (hi - lo) i / (n - 1).
  auto splits = [](const CudaBuilderCfg &c, int n, int32_t lo, int32_t hi) {
    std::vector<int32_t> lens;
    for (int r = 0; r < n; ++r) lens.push_back(n > 1 ? lo + static_cast<int32_t>(int64_t(hi - lo) * r / (n - 1)) : hi);
    std::vector<char> host;
    return decode_schedule(c, lens, &host).dec_splits;
  };
  struct Case {
    bool fp8;
    int n;
    int32_t lo, hi;
    int splits;
  } cases[] = {
      // The benchmark table's decode shapes (1x32768 and 8x8192: lone CTAs).
      {false, 1, 32768, 32768, 16}, {false, 8, 8192, 8192, 2}, {false, 32, 4096, 4096, 1},
      {false, 64, 2048, 2048, 1}, {false, 128, 1024, 1024, 1}, {false, 128, 4096, 4096, 1},
      {false, 256, 512, 512, 1}, {true, 8, 8192, 8192, 4}, {true, 32, 4096, 4096, 1},
      // One wave of longer parts, not two of short ones (16-bit CTA keys).
      {false, 6, 8192, 8192, 5}, {false, 9, 4096, 4096, 3}, {false, 12, 2048, 2048, 1},
      {false, 5, 16384, 16384, 3}, {false, 1, 8192, 8192, 16},
      // Lone CTAs (CudaBuilderCfg::dec_lone), timed in session 29: one CTA
      // per SM instead of two waves or two per SM; a short split (3x2048,
      // 4x8192, 6x1024, 8x4096) stays paired.
      {false, 13, 4096, 4096, 1}, {false, 14, 8192, 8192, 1}, {false, 20, 1024, 1024, 1},
      {false, 7, 12288, 12288, 2}, {false, 6, 16384, 16384, 5}, {false, 9, 6144, 6144, 3},
      {false, 2, 4096, 4096, 8}, {false, 5, 24576, 24576, 3}, {false, 3, 2048, 2048, 8},
      {false, 4, 8192, 8192, 8}, {false, 6, 1024, 1024, 4}, {false, 8, 4096, 4096, 4},
      // Two fp8 CTAs per SM on one long request (fp8 merge keys).
      {true, 1, 8192, 8192, 32}, {true, 1, 12288, 12288, 32}, {true, 1, 16384, 16384, 32},
      {true, 1, 32768, 32768, 33}, {true, 8, 2048, 32768, 16},
      // Session 33: plans of several waves count warp rounds, so fp8 takes
      // fewer, longer parts (one wave instead of two, three instead of four).
      {true, 6, 16384, 16384, 5}, {true, 12, 32768, 32768, 8}, {true, 7, 12288, 12288, 4},
      {true, 12, 3072, 3072, 2}, {false, 7, 65536, 65536, 9},
  };
  const CudaBuilderCfg c16 = hopper_cfg(false, 8), c8 = hopper_cfg(true, 8);
  for (const Case &k : cases) {
    EXPECT_EQ(splits(k.fp8 ? c8 : c16, k.n, k.lo, k.hi), k.splits)
        << (k.fp8 ? "fp8 " : "16-bit ") << k.n << " x " << k.lo << "-" << k.hi;
  }
  // Fewer KV heads (group 4), timed in session 28 (docs/benchmarks.md).
  struct FewHeads {
    bool fp8;
    int kv_heads, n;
    int32_t len;
    int splits;
  } few[] = {
      {false, 1, 96, 2048, 1}, {false, 1, 48, 8192, 5}, {false, 2, 24, 8192, 5},
      {false, 4, 12, 8192, 5}, {true, 1, 2, 8192, 64}, {true, 1, 5, 12288, 48},
      // Session 29: lone CTAs where they fill more than half the SMs; a
      // single request on 1 KV head keeps its 64 parts (64 CTAs).
      {false, 4, 28, 8192, 1}, {false, 2, 28, 12288, 2}, {false, 1, 1, 8192, 64},
      {false, 1, 2, 8192, 64}, {false, 2, 1, 8192, 64},
      // Session 33: warp rounds in plans of several waves, and in one-wave
      // 16-bit plans whose longest part has 256-1023 keys.
      {true, 4, 12, 16384, 5}, {false, 2, 48, 6144, 1}, {false, 4, 7, 3072, 8},
      {false, 2, 7, 4096, 8}, {false, 4, 1, 10000, 32},
      // Session 34: one KV head splits up to 128 ways (tree merges) where
      // the range holds 128 parts of 256 keys; two KV heads stay at 64.
      {false, 1, 1, 32768, 128}, {false, 1, 1, 65536, 128}, {true, 1, 1, 65536, 128},
      {false, 1, 1, 16384, 64}, {false, 1, 1, 20000, 63}, {false, 1, 2, 65536, 64}, {false, 2, 1, 65536, 64},
  };
  for (const FewHeads &k : few) {
    EXPECT_EQ(splits(hopper_cfg(k.fp8, k.kv_heads), k.n, k.len, k.len), k.splits)
        << (k.fp8 ? "fp8 " : "16-bit ") << k.kv_heads << " KV heads, " << k.n << " x " << k.len;
  }
}

// A tile of more than kern::kMaxSelfMergeParts parts merges in a tree: one
// KV head, 8 query heads, one request of 65536 keys takes 128 parts in 16
// groups of 8, whose merge words, workspace rows and arrival counters the
// kernels read as launch.h states.
TEST(CudaSchedule, TreeMergeOfOneKvHead) {
  const CudaBuilderCfg c = hopper_cfg(false, 1, 8);
  std::vector<char> host;
  const vattn::CudaSchedule sc = decode_schedule(c, {65536, 300}, &host);
  const vattn::CudaPlanLayout L = vattn::cuda_plan_layout(c);
  const kern::AttnItem *items = reinterpret_cast<const kern::AttnItem *>(host.data() + L.items);
  std::vector<const kern::AttnItem *> tile;
  for (int64_t i = sc.n_gen; i < sc.n_items; ++i)
    if (items[i].req == 0) tile.push_back(&items[i]);
  ASSERT_EQ(tile.size(), 128u);
  std::set<int32_t> slots;
  for (size_t i = 0; i < tile.size(); ++i) {
    const kern::AttnItem &it = *tile[i];
    EXPECT_EQ(kern::self_merge_parts(it.merge), 128);
    EXPECT_EQ(kern::self_merge_index(it.merge), static_cast<int>(i));
    EXPECT_EQ(kern::self_merge_group(it.merge), vattn::kDecMergeGroup);
    EXPECT_EQ(it.merge_slot, tile[0]->merge_slot);
    EXPECT_EQ(it.ws_base, tile[0]->ws_base + static_cast<int32_t>(i) * 8);
    EXPECT_EQ(it.kv_end - it.kv_begin, 512);
  }
  EXPECT_EQ(kern::self_merge_counters(128, vattn::kDecMergeGroup), 17);
  // The short request does not split; the counters of the tile stay below
  // the plan's capacity.
  EXPECT_LE(tile[0]->merge_slot + 17, c.cap_items);
}

}  // namespace

#endif  // VATTN_WITH_CUDA
