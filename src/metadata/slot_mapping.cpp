// slot_mapping.cpp -- v1 (block table + positions, context parallel) and v0
// (per-sequence) slot mappings.  See slot_mapping.h.
#include "metadata/slot_mapping.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "metadata/metadata.h"

namespace vattn {

using ll = long long;

namespace {

vattn_status_t check_v1_args(const vattn_slot_mapping_args_t &a, int64_t len) {
  VATTN_CHECK_ARG(a.num_reqs >= 0 && a.num_reqs < kMaxTokens,
                  "argument 'args': num_reqs = %lld is out of range", (ll)a.num_reqs);
  VATTN_CHECK_ARG(a.num_rows >= a.num_reqs && a.num_rows <= kMaxArrayElems,
                  "argument 'args': num_rows = %lld must be >= num_reqs = %lld", (ll)a.num_rows,
                  (ll)a.num_reqs);
  VATTN_CHECK_ARG(a.row_stride >= 0 && a.row_stride <= kMaxArrayElems,
                  "argument 'args': row_stride = %lld is out of range", (ll)a.row_stride);
  int64_t elems = 0;
  VATTN_CHECK_ARG(!__builtin_mul_overflow(a.num_rows, a.row_stride, &elems) && elems <= kMaxArrayElems,
                  "argument 'args': num_rows * row_stride = %lld x %lld overflows", (ll)a.num_rows,
                  (ll)a.row_stride);
  VATTN_CHECK_ARG(a.block_size > 0, "argument 'args': block_size = %d must be positive", a.block_size);
  VATTN_CHECK_ARG(a.num_cache_blocks >= 0 && a.num_cache_blocks <= kMaxArrayElems,
                  "argument 'args': num_cache_blocks = %lld is out of range", (ll)a.num_cache_blocks);
  VATTN_CHECK_ARG(a.cp_world_size >= 1, "argument 'args': cp_world_size = %d must be >= 1",
                  a.cp_world_size);
  VATTN_CHECK_ARG(a.cp_rank >= 0 && a.cp_rank < a.cp_world_size,
                  "argument 'args': cp_rank = %d is outside [0, cp_world_size = %d)", a.cp_rank,
                  a.cp_world_size);
  // Each rank's share of a virtual block must fill exactly one block.
  VATTN_CHECK_ARG(a.cp_interleave >= 1 && a.block_size % a.cp_interleave == 0,
                  "argument 'args': cp_interleave = %d must be >= 1 and divide block_size = %d",
                  a.cp_interleave, a.block_size);
  VATTN_CHECK_ARG(a.num_tokens >= 0 && a.num_tokens <= kMaxTokens,
                  "argument 'args': num_tokens = %lld is out of range", (ll)a.num_tokens);
  VATTN_CHECK_ARG(len >= a.num_tokens && len <= kMaxArrayElems,
                  "argument 'slot_mapping_len' = %lld is smaller than num_tokens = %lld (or too large)",
                  (ll)len, (ll)a.num_tokens);
  VATTN_CHECK_ARG(a.query_start_loc != nullptr, "argument 'args': query_start_loc is NULL");
  VATTN_CHECK_ARG(a.block_table != nullptr || elems == 0, "argument 'args': block_table is NULL");
  VATTN_CHECK_ARG(a.positions != nullptr || a.num_tokens == 0, "argument 'args': positions is NULL");
  const int32_t *q = a.query_start_loc;
  VATTN_CHECK_ARG(q[0] == 0, "argument 'args': query_start_loc[0] = %d must be 0", q[0]);
  for (int64_t i = 1; i <= a.num_reqs; ++i)
    VATTN_CHECK_ARG(q[i] >= q[i - 1],
                    "argument 'args': query_start_loc[%lld] = %d < query_start_loc[%lld] = %d", (ll)i,
                    q[i], (ll)(i - 1), q[i - 1]);
  VATTN_CHECK_ARG(q[a.num_reqs] == a.num_tokens,
                  "argument 'args': num_tokens = %lld != query_start_loc[num_reqs] = %d",
                  (ll)a.num_tokens, q[a.num_reqs]);
  if (a.num_blocks_per_row)
    for (int64_t r = 0; r < a.num_reqs; ++r)
      VATTN_CHECK_ARG(a.num_blocks_per_row[r] >= 0 && a.num_blocks_per_row[r] <= a.row_stride,
                      "argument 'args': num_blocks_per_row[%lld] = %d is outside [0, row_stride = %lld]",
                      (ll)r, a.num_blocks_per_row[r], (ll)a.row_stride);
  return VATTN_OK;
}

}  // namespace

namespace {

// The general rule (context parallelism); reports the first bad token.
vattn_status_t slot_mapping_v1_general(const vattn_slot_mapping_args_t &a, int64_t *slots) {
  const int64_t bs = a.block_size, world = a.cp_world_size, il = a.cp_interleave;
  const int64_t vb = bs * world;  // tokens per virtual block across ranks
  for (int64_t r = 0; r < a.num_reqs; ++r) {
    int64_t valid = a.num_blocks_per_row ? a.num_blocks_per_row[r] : a.row_stride;
    const int32_t *row = a.block_table + r * a.row_stride;
    for (int64_t t = a.query_start_loc[r]; t < a.query_start_loc[r + 1]; ++t) {
      int64_t pos = a.positions[t];
      VATTN_CHECK_ARG(pos >= 0, "argument 'args': positions[%lld] = %lld is negative", (ll)t, (ll)pos);
      int64_t bi = pos / vb, vo = pos - bi * vb;
      VATTN_CHECK_ARG(bi < valid,
                      "argument 'args': positions[%lld] = %lld (request %lld) needs block index %lld "
                      "but the row has %lld valid entries",
                      (ll)t, (ll)pos, (ll)r, (ll)bi, (ll)valid);
      if ((vo / il) % world != a.cp_rank) {
        slots[t] = VATTN_PAD_SLOT_ID;  // another rank stores this token
        continue;
      }
      int32_t id = row[bi];
      VATTN_CHECK_ARG(id >= 0 && (a.num_cache_blocks == 0 || id < a.num_cache_blocks),
                      "argument 'args': block_table[%lld][%lld] = %d is outside the cache [0, %lld)",
                      (ll)r, (ll)bi, id, (ll)a.num_cache_blocks);
      int64_t local = (vo / (world * il)) * il + vo % il;
      slots[t] = (int64_t)id * bs + local;
    }
  }
  return VATTN_OK;
}

// No context parallelism (cp_world_size 1): slot = id * bs + pos % bs,
// with a shift and a mask when the block size is a power of two.  Returns
// false at the first bad token (the general loop then names it).
template <bool kPow2>
bool slot_mapping_v1_plain(const vattn_slot_mapping_args_t &a, int64_t *slots) {
  const int64_t bs = a.block_size;
  const int shift = __builtin_ctzll(static_cast<uint64_t>(bs));
  // id in [0, lim) <=> (uint32)id < lim, with lim <= 2^31.
  const uint64_t lim = a.num_cache_blocks == 0 || a.num_cache_blocks > INT32_MAX
                           ? (uint64_t)INT32_MAX + 1
                           : (uint64_t)a.num_cache_blocks;
  const int32_t *qsl = a.query_start_loc;
  for (int64_t r = 0; r < a.num_reqs; ++r) {
    const int64_t valid = a.num_blocks_per_row ? a.num_blocks_per_row[r] : a.row_stride;
    const int32_t *row = a.block_table + r * a.row_stride;
    for (int64_t t = qsl[r], end = qsl[r + 1]; t < end; ++t) {
      const int64_t pos = a.positions[t];
      if (pos < 0) return false;
      const int64_t bi = kPow2 ? pos >> shift : pos / bs;
      if (bi >= valid) return false;
      const uint32_t id = static_cast<uint32_t>(row[bi]);
      if (id >= lim) return false;
      slots[t] = static_cast<int64_t>(id) * bs + (pos - bi * bs);
    }
  }
  return true;
}

}  // namespace

vattn_status_t slot_mapping_v1(const vattn_slot_mapping_args_t &a, int64_t *out, int64_t len) {
  VATTN_TRY(check_v1_args(a, len));
  // Compute into scratch space so that a bad token leaves `out` untouched.
  std::unique_ptr<int64_t[]> slots(new int64_t[static_cast<size_t>(a.num_tokens)]);
  bool done = false;
  if (a.cp_world_size == 1) {
    done = (a.block_size & (a.block_size - 1)) == 0 ? slot_mapping_v1_plain<true>(a, slots.get())
                                                    : slot_mapping_v1_plain<false>(a, slots.get());
  }
  if (!done) VATTN_TRY(slot_mapping_v1_general(a, slots.get()));
  std::copy(slots.get(), slots.get() + a.num_tokens, out);
  std::fill(out + a.num_tokens, out + len, (int64_t)VATTN_PAD_SLOT_ID);
  return VATTN_OK;
}

int64_t slot_mapping_v0_start_idx(bool is_prompt, int64_t query_len, int64_t sliding_window) {
  if (is_prompt && sliding_window > 0) return std::max<int64_t>(0, query_len - sliding_window);
  return 0;
}

int64_t slot_mapping_v0_count(bool is_profile_run, int64_t seq_len, int64_t context_len,
                              int64_t start_idx) {
  if (is_profile_run) return seq_len;
  int64_t pads = std::max<int64_t>(0, start_idx - context_len);
  int64_t first = std::max(start_idx, context_len);
  return pads + std::max<int64_t>(0, seq_len - first);
}

vattn_status_t slot_mapping_v0_append(bool is_profile_run, int64_t seq_len, int64_t context_len,
                                      int64_t start_idx, int32_t block_size,
                                      const int32_t *block_table, int64_t block_table_len,
                                      int64_t num_cache_blocks, std::vector<int64_t> *out) {
  if (is_profile_run) {
    // Profile run: no blocks yet, every token pads.
    out->insert(out->end(), static_cast<size_t>(seq_len), (int64_t)VATTN_PAD_SLOT_ID);
    return VATTN_OK;
  }
  int64_t first = std::max(start_idx, context_len);
  if (first < seq_len) {
    int64_t last_block = (seq_len - 1) / block_size;
    VATTN_CHECK_ARG(block_table != nullptr, "argument 'block_table' is NULL but %lld blocks are needed",
                    (ll)(last_block + 1));
    VATTN_CHECK_ARG(last_block < block_table_len,
                    "argument 'block_table_len' = %lld is too short: position %lld needs block index %lld",
                    (ll)block_table_len, (ll)(seq_len - 1), (ll)last_block);
    for (int64_t b = first / block_size; b <= last_block; ++b)
      VATTN_CHECK_ARG(block_table[b] >= 0 && (num_cache_blocks == 0 || block_table[b] < num_cache_blocks),
                      "argument 'block_table': block_table[%lld] = %d is outside the cache [0, %lld)",
                      (ll)b, block_table[b], (ll)num_cache_blocks);
  }
  out->insert(out->end(), static_cast<size_t>(std::max<int64_t>(0, start_idx - context_len)),
              (int64_t)VATTN_PAD_SLOT_ID);
  for (int64_t i = first; i < seq_len; ++i)
    out->push_back((int64_t)block_table[i / block_size] * block_size + i % block_size);
  return VATTN_OK;
}

}  // namespace vattn
