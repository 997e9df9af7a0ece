// metadata.h -- CommonAttentionMetadata (vLLM era B) as a validated,
// host-owned value.  Backend-neutral: builders of every backend read it.
//
// Invariants once created (checked by metadata_create):
//   query_start_loc: [num_reqs + 1], [0] == 0, non-decreasing,
//                    [num_reqs] <= num_actual_tokens
//   seq_lens[r] >= query_len[r] = qsl[r+1] - qsl[r]; num_computed_tokens[r] =
//                    seq_lens[r] - query_len[r] unless given (then it must match)
//   block_table: row-major [block_table_rows >= num_reqs, block_table_cols];
//                every block needed by a request (ceil(seq_len / block_size)
//                entries of its row, when block_size > 0) is in
//                [0, num_cache_blocks) when num_cache_blocks > 0
//   slot_mapping: real entries in [0, num_cache_blocks * block_size) or -1
//   max_query_len / max_seq_len >= the real maxima
//
// The block table, slot mapping and local gather columns are copy-on-write
// (core/cow_vector.h): copying a Metadata (a plan keeps one per build)
// shares them instead of copying them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cow_vector.h"
#include "vattn.h"

namespace vattn {

struct Metadata {
  int64_t num_reqs = 0;
  int64_t num_actual_tokens = 0;
  std::vector<int32_t> query_start_loc;      // [num_reqs + 1]
  std::vector<int32_t> seq_lens;             // [num_reqs]
  std::vector<int32_t> num_computed_tokens;  // [num_reqs] (always filled)
  CowVector<int32_t> block_table;            // [block_table_rows * block_table_cols]
  int64_t block_table_rows = 0;
  int64_t block_table_cols = 0;
  CowVector<int64_t> slot_mapping;           // [slot_mapping_len]
  bool causal = true;
  int32_t max_query_len = 0;
  int32_t max_seq_len = 0;
  int32_t block_size = 0;                    // 0 = unknown
  int64_t num_cache_blocks = 0;              // 0 = unchecked
  bool has_encoder_seq_lens = false;
  std::vector<int32_t> encoder_seq_lens;     // [num_reqs] when present
  std::vector<int32_t> logits_indices_padded;
  int64_t num_logits_indices = 0;
  bool has_logits_indices = false;
  bool has_dcp_local_seq_lens = false;
  std::vector<int32_t> dcp_local_seq_lens;   // [num_reqs] when present
  // Set only by make_local_attention_virtual_batches: where each entry of
  // the local block table [num_reqs, block_table_cols] was gathered from
  // (source row per virtual batch, clamped source column per entry), so the
  // gather can be replayed on another block table (vLLM make_block_table).
  std::vector<int32_t> local_src_row;        // [num_reqs]
  CowVector<int32_t> local_src_col;          // [num_reqs * block_table_cols]

  // What check_metadata measured, so that a forward pass checks the plan
  // against its KV cache in O(1) instead of rescanning the block table and
  // slot mapping for every layer.  Set by check_metadata only (every code
  // path that produces a Metadata ends with it; any code that changes the
  // arrays afterwards must run it again).
  struct Scan {
    // blocks_valid: for every request r < num_reqs, the first
    // ceil(seq_lens[r] / block_size) entries of its row (the whole row when
    // block_size is 0) are within the row and in [0, max_block_id]
    // (max_block_id = -1: no entry needed).  False when not measured
    // (cross-attention metadata, or a negative id in a table that was not
    // checked against a cache): the forward pass then scans.
    bool blocks_valid = false;
    int32_t block_size = 0;
    int32_t max_block_id = -1;
    int32_t max_seq_len = 0;  // real maximum of seq_lens[0, num_reqs)
    // slots_valid: every slot_mapping entry is -1 or in [0, max_slot].
    bool slots_valid = false;
    int64_t max_slot = -1;
  } scan;

  int32_t query_len(int64_t r) const { return query_start_loc[r + 1] - query_start_loc[r]; }
  // Real (unpadded) token count.
  int64_t num_real_tokens() const { return query_start_loc[num_reqs]; }
  const int32_t *block_row(int64_t r) const { return block_table.data() + r * block_table_cols; }
};

}  // namespace vattn

namespace vattn {

// ---- helpers shared by the metadata area (metadata_check.cpp) -------------

// Checks every invariant listed at the top of this file on `m` (already
// holding its arrays).  max_query_len / max_seq_len == -1 are computed;
// other values must be >= the real maxima.  `what` names the argument in
// messages ("argument 'desc': query_start_loc[3] = 5 < query_start_loc[2] = 7").
vattn_status_t check_metadata(Metadata &m, const char *what);

// Copies a caller's description into `out` after checking sizes and
// pointers (before reading any array), then runs check_metadata.
vattn_status_t metadata_from_desc(const vattn_metadata_desc_t &d, const char *what,
                                  Metadata *out);

// Fills `out` (all fields; struct_size = sizeof) with pointers into `m`.
void metadata_to_desc(const Metadata &m, vattn_metadata_desc_t *out);

// vLLM CommonAttentionMetadata.unpadded: per-request arrays truncated to
// num_reqs, query_start_loc to num_reqs + 1, slot_mapping to num_tokens;
// maxima kept.
vattn_status_t metadata_unpadded(const Metadata &m, int64_t num_tokens, int64_t num_reqs,
                                 Metadata *out);

// Largest element counts accepted for arrays read from callers (keeps
// every index and product far away from int64 overflow).
constexpr int64_t kMaxTokens = INT32_MAX;
constexpr int64_t kMaxArrayElems = INT64_C(1) << 40;

}  // namespace vattn

// The C handle is the value itself.
struct vattn_metadata {
  vattn::Metadata md;
};
