// v0_metadata.h -- vLLM v0 AttentionMetadata (prefills first, then decodes),
// its per-sequence builder and the CUDA-graph state (header section 9).
#pragma once

#include <cstdint>
#include <vector>

#include "vattn.h"

namespace vattn {

// A v0 metadata value.  `view` is what describe() returns: its arrays point
// into the owned vectors below, or, for metadata made by a graph state,
// into that state's persistent buffers (then the vectors are empty and the
// view lives as long as the state).
struct V0Metadata {
  std::vector<int64_t> slot_mapping;
  std::vector<int32_t> seq_lens, context_lens, query_start_loc, seq_start_loc, block_tables;
  std::vector<int32_t> encoder_seq_lens, cross_block_tables;
  vattn_v0_metadata_desc_t view{};
};

// Checks a description: sizes, pointers (NULL only where optional or
// empty), non-negative counts, monotonic start locations.
vattn_status_t v0_metadata_check(const vattn_v0_metadata_desc_t &d, const char *what);
// Deep-copies a checked description into `out` and points out->view at it.
void v0_metadata_own(const vattn_v0_metadata_desc_t &d, V0Metadata *out);

// get_num_prefill_decode_query_kv_tokens.
vattn_status_t v0_num_prefill_decode_query_kv_tokens(const vattn_v0_metadata_desc_t &d,
                                                     int32_t attn_type, int64_t out3[3]);

}  // namespace vattn

struct vattn_v0_metadata {
  vattn::V0Metadata md;
};
