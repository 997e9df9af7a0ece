// graph_state.cpp -- see graph_state.h.
#include "metadata/v0/graph_state.h"

#include <algorithm>

#include "core/error.h"

namespace vattn {

using ll = long long;

GraphState::GraphState(int64_t max_batch, int32_t max_blocks, int32_t max_seq_len)
    : max_batch_(max_batch),
      max_blocks_(max_blocks),
      max_seq_len_(max_seq_len),
      slot_mapping_((size_t)max_batch, (int64_t)VATTN_PAD_SLOT_ID),
      seq_lens_((size_t)max_batch, 1),
      block_tables_((size_t)(max_batch * max_blocks), 0) {}

vattn_status_t GraphState::metadata_for_batch(int64_t batch_size, V0Metadata *out) const {
  VATTN_CHECK_ARG(batch_size > 0 && batch_size <= max_batch_,
                  "argument 'batch_size' = %lld is outside [1, max_batch_size = %lld]", (ll)batch_size,
                  (ll)max_batch_);
  V0Metadata m;
  vattn_v0_metadata_desc_t &d = m.view;
  vattn_v0_metadata_desc_init(&d);
  d.num_prefills = 0;
  d.num_prefill_tokens = 0;
  d.num_decode_tokens = batch_size;
  d.num_seqs = batch_size;
  d.slot_mapping = slot_mapping_.data();
  d.slot_mapping_len = batch_size;
  d.seq_lens = seq_lens_.data();
  d.block_tables = block_tables_.data();
  d.block_tables_cols = max_blocks_;
  d.max_query_len = 1;
  d.max_decode_query_len = 1;
  d.max_prefill_seq_len = 0;
  d.max_decode_seq_len = max_seq_len_;
  d.use_cuda_graph = 1;
  // query_start_loc, seq_start_loc and context_lens stay NULL (as in vLLM).
  *out = std::move(m);
  return VATTN_OK;
}

vattn_status_t GraphState::prepare_replay(const vattn_v0_metadata_desc_t &md) {
  VATTN_CHECK_ARG(md.num_prefills == 0 && md.num_prefill_tokens == 0,
                  "argument 'md' has %lld prefills: only decode batches replay a CUDA graph", (ll)md.num_prefills);
  VATTN_CHECK_ARG(md.num_seqs <= max_batch_, "argument 'md': num_seqs = %lld exceeds max_batch_size = %lld",
                  (ll)md.num_seqs, (ll)max_batch_);
  VATTN_CHECK_ARG(md.slot_mapping_len <= max_batch_,
                  "argument 'md': slot_mapping_len = %lld exceeds max_batch_size = %lld", (ll)md.slot_mapping_len,
                  (ll)max_batch_);
  VATTN_CHECK_ARG(md.block_tables_cols <= max_blocks_,
                  "argument 'md': block_tables_cols = %lld exceeds max_blocks_per_seq = %d",
                  (ll)md.block_tables_cols, max_blocks_);
  for (int64_t i = 0; i < md.num_seqs; ++i)
    VATTN_CHECK_ARG(md.seq_lens[i] <= max_seq_len_,
                    "argument 'md': seq_lens[%lld] = %d exceeds max_seq_len_to_capture = %d", (ll)i, md.seq_lens[i],
                    max_seq_len_);
  // md may view these very buffers: copy through temporaries.
  std::vector<int64_t> sm((size_t)max_batch_, (int64_t)VATTN_PAD_SLOT_ID);
  std::vector<int32_t> sl((size_t)max_batch_, 1), bt((size_t)(max_batch_ * max_blocks_), 0);
  std::copy(md.slot_mapping, md.slot_mapping + md.slot_mapping_len, sm.begin());
  std::copy(md.seq_lens, md.seq_lens + md.num_seqs, sl.begin());
  for (int64_t r = 0; r < md.num_seqs; ++r)
    std::copy(md.block_tables + r * md.block_tables_cols, md.block_tables + (r + 1) * md.block_tables_cols,
              bt.begin() + r * max_blocks_);
  // Copy back in place: the buffers' addresses never change.
  std::copy(sm.begin(), sm.end(), slot_mapping_.begin());
  std::copy(sl.begin(), sl.end(), seq_lens_.begin());
  std::copy(bt.begin(), bt.end(), block_tables_.begin());
  return VATTN_OK;
}

}  // namespace vattn
