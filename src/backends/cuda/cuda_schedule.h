// cuda_schedule.h -- the CUDA builder's host work, without a CUDA call:
// metadata -> the plan's tables (requests, work items, unit order, merge
// tables, block table, slot mapping) in a host staging mirror.  The builder
// (cuda_builder.cpp) uploads what this fills; tests and the host benchmark
// run it on machines without a GPU.
//
// Schedule, per build:
//  - rows of request r are (token, head-in-group) pairs, G = H / KVH per
//    token; a tile holds floor(BM / G) whole tokens (so a token's heads are
//    never split across tiles and the merge pass can find them);
//  - causal tiles stop at the last key their last token sees;
//  - when the batch has too few tiles to fill the GPU, each general tile's
//    key range is split (flash-decoding) into up to max_num_splits chunks of
//    >= 256 keys, aligned to 64 keys; split tiles write fp32 partials to the
//    plan's workspace and the merge pass combines them;
//  - requests whose query rows fit one decode item go to the decode kernel,
//    with one split count for the batch chosen by a cost model (.cpp);
//  - cascade (common_prefix_len P > 0): one extra request covers every query
//    token against keys [0, P) of request 0's block-table row (non-causal),
//    every real request attends keys [P, seq_len); all partials are merged.
//    If the workspace cannot hold both passes the plan falls back to the
//    equivalent single pass (same result when the prefix blocks are shared,
//    which is what cascade requires).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "launch.h"

namespace vattn {

// Byte offsets of the plan's arrays in its device buffer and host mirrors
// (cuda_plan.h describes them).
struct CudaPlanLayout {
  size_t header = 0, reqs = 0, items = 0, tok_parts = 0, part_list = 0, block_table = 0,
         slot_mapping = 0, merge_ctr = 0, unit_ctr = 0, units = 0, meta_end = 0, ws_lse = 0,
         ws_o = 0, total = 0;
};

// Decode cost model (cuda_schedule.cpp), in keys: a decode CTA's fixed cost,
// and the cost of a merge round past kDecMergeRoundParts parts.
constexpr int64_t kDecCtaOverheadKeys = 128;
constexpr int64_t kDecMergeRoundKeys = 256;
// Self-merge tree (cuda_schedule.cpp gives the measurements): group size,
// the most parts a tile merges flat, and the fewest keys of a part when a
// tile has more than kern::kMaxSelfMergeParts.
constexpr int32_t kDecMergeGroup = 8;
constexpr int32_t kDecMergeFlat = kern::kMaxSelfMergeParts;
constexpr int64_t kDecTreeMinKeys = 256;

// What a builder fixes at creation (cuda_create_builder fills it from the
// options and the device).
struct CudaBuilderCfg {
  vattn_builder_options_t o;
  int32_t num_sms = 0, max_splits = 0;
  bool decode = false;  // decode items scheduled for the decode kernel
  int32_t dec_slots = 0, dec_max_splits = 0;
  // Decode CTAs that keep the memory busy (<= dec_slots; 0: dec_slots):
  // more resident CTAs share the bandwidth instead of adding to it.
  int32_t dec_sat_slots = 0;
  // Lone decode CTAs (16-bit caches at head size 128, two resident per SM):
  // a CTA alone on its SM streams at the SM's whole share, so the split
  // model counts its keys half where the CTAs fit one per SM over more than
  // half the SMs; and each wave of equal parts past the first costs one
  // more CTA's fixed cost (search_decode_splits: the rule and what it was
  // measured on).  VATTN_CUDA_DECODE_LONE=0 clears it at builder creation.
  bool dec_lone = false;
  // Which plans count their longest part in rounds of the decode CTA's
  // warps (search_decode_splits): 0 none (the model before session 33), 1
  // plans of more than one wave whose longest part has 512 keys or more, 2
  // those and one-wave plans whose longest part has 256-1023 keys (16-bit
  // caches at head size 128, two resident CTAs per SM).  VATTN_CUDA_DECODE_ROUNDS=0 / 1 / 2 sets it at builder
  // creation (A/B).
  int32_t dec_rounds = 1;
  // KV heads per decode CTA (kern::decode_kv_heads_per_cta) and the rows a
  // decode item may hold (16, or one head's 8 when a CTA runs two heads).
  int32_t dec_heads = 1, dec_rows = kern::kDecodeRows;
  // Set per cache kind and head size by cuda_decode_cost_keys;
  // VATTN_CUDA_DECODE_CTA_KEYS / VATTN_CUDA_DECODE_MERGE_KEYS override
  // them at builder creation.
  int64_t dec_cta_keys = kDecCtaOverheadKeys;
  int64_t dec_merge_keys = kDecMergeRoundKeys;
  // Decode tiles in the order of their key ranges, longest first (the
  // plan's cache is 16-bit; cuda_schedule.cpp says why not for fp8).
  bool dec_longest_first = false;
  // Self-merging split tiles (kern::AttnItem::merge): a tile of more than
  // dec_merge_flat parts merges in a tree of groups of dec_merge_group
  // parts; smaller ones merge flat.  VATTN_CUDA_DECODE_MERGE_GROUP (0 =
  // always flat) and VATTN_CUDA_DECODE_MERGE_FLAT set them at builder
  // creation (A/B).
  int32_t dec_merge_group = kDecMergeGroup, dec_merge_flat = kDecMergeFlat;
  int32_t group = 1, tokens_per_tile = 1;
  int64_t cap_items = 0, ws_rows = 0, cap_parts = 0;  // cuda_size_plan
};

// What cuda_create_builder reads from the device for the configuration.
struct CudaDeviceFacts {
  int32_t num_sms = 0;          // SMs (the options' num_sms where set)
  int32_t rows_per_tile = 0;    // rows of a general item: kern::attention_rows_per_tile
  int32_t dec_ctas_per_sm = 0;  // resident decode CTAs per SM (occupancy API); 0 = not known
                                //   (or no decode kernel at this head size)
};

// The builder's configuration for options o (already validated: G = H / KVH
// <= the kernels' rows per tile, block_size a multiple of 16) on a device
// with facts d, sized by cuda_size_plan.  No CUDA call; reads
// VATTN_CUDA_DECODE_KERNEL, VATTN_CUDA_DECODE_CTA_KEYS,
// VATTN_CUDA_DECODE_MERGE_KEYS, VATTN_CUDA_DECODE_LONE, VATTN_CUDA_DECODE_ROUNDS,
// VATTN_CUDA_DECODE_MERGE_GROUP and VATTN_CUDA_DECODE_MERGE_FLAT.
CudaBuilderCfg cuda_builder_cfg(const vattn_builder_options_t &o, const CudaDeviceFacts &d);

// Sets c->cap_items, ws_rows and cap_parts from the rest of *c.
void cuda_size_plan(CudaBuilderCfg *c);

// The decode cost model's keys per CTA and per merge round (dec_cta_keys,
// dec_merge_keys) for a cache kind (kern::kCacheAuto = 16-bit, else fp8)
// and head size; cuda_schedule.cpp gives the measurements behind them.
void cuda_decode_cost_keys(int32_t cache, int32_t head_size, int64_t *cta_keys, int64_t *merge_keys);

// The plan's device layout for a configuration (offsets of CudaPlanLayout).
CudaPlanLayout cuda_plan_layout(const CudaBuilderCfg &c);

// Per-build working arrays, kept by the plan so that a warm build does not
// allocate.
struct CudaScheduleScratch {
  struct Tile {
    int32_t req, tok0, ntok, kv_lo, kv_hi, kv_end;
  };
  struct Part {
    int32_t tok, p;  // a token's partial at workspace row p (+ head in group)
  };
  // Decode tiles whose part cap (range / min_keys) is k, for the split
  // search (cuda_schedule.cpp): sizes, ranges, the parts they get once
  // saturated, and suffix aggregates over buckets >= k.
  struct DecBucket {
    int64_t n = 0, rows = 0, rmin = 0, rmax = 0;
    int64_t items = 0, ws = 0, chunk = 0;
    int parts = 1;
    bool short_parts = false;
    int64_t suf_n = 0, suf_rows = 0, suf_rmin = 0, suf_rmax = 0;
  };
  std::vector<Tile> tiles, dtiles;  // general, decode
  std::vector<DecBucket> dec_buckets;
  std::vector<Part> parts;
  std::vector<int64_t> gen_keys;  // keys each general item visits
  std::vector<uint64_t> dec_order;  // decode tiles' sort keys (range, index)
  std::vector<Tile> dec_tmp;        // decode tiles before that order
  std::vector<int32_t> cnt;       // merge tables: parts per token, then cursors
};

// What a schedule produced (the builder sizes copies and grids from it).
struct CudaSchedule {
  int64_t n_items = 0;   // items [0, n_gen) general, [n_gen, n_items) decode
  int64_t n_gen = 0;
  int64_t n_parts = 0;   // part_list entries
  int64_t n_reqs = 0;    // AttnReq records (+1 with cascade)
  int64_t ntok_out = 0;  // tok_parts entries (num_actual_tokens)
  int64_t bt_width = 0;  // widest block-table prefix staged (entries)
  bool cascade = false;
  bool merge_pass = false;  // merge tables filled (parts, padding rows or capture)
  int32_t dec_splits = 1;   // the decode split count the cost model chose
};

// Fills host[0, L.meta_end) as laid out by L (header, reqs, items, units,
// tok_parts / part_list when merge_pass, block-table prefixes, slot
// mapping).  `capture`: built for CUDA-graph capture (merge pass always).
vattn_status_t cuda_schedule(const CudaBuilderCfg &c, const CudaPlanLayout &L, char *host,
                             const Metadata &md, int64_t common_prefix_len, bool capture,
                             CudaScheduleScratch *scratch, CudaSchedule *out);

}  // namespace vattn
