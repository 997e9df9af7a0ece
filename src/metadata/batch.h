// batch.h -- batch utilities over CommonAttentionMetadata (header section 8),
// vLLM era B semantics (see reference/vllm-semantics.md sections 4-10).
// Every function validates its scalar arguments, names them in messages,
// and writes its outputs only on success.
#pragma once

#include <cstdint>
#include <vector>

#include "metadata/metadata.h"
#include "vattn.h"

namespace vattn {

vattn_status_t split_decodes_and_prefills(const Metadata &m, int32_t threshold,
                                          bool require_uniform, vattn_decode_prefill_split_t *out);
vattn_status_t split_decodes_prefills_and_extends(const Metadata &m, int32_t threshold,
                                                  vattn_decode_extend_prefill_split_t *out);

// Era B 3-way reorder.  regions: 0 decode, 1 extend, 2 prefill.
struct ReorderResult {
  std::vector<int64_t> swaps;  // pairs (i, j), applied in order
  std::vector<int64_t> order;  // order[i] = original index now in slot i
  bool modified = false;
};
vattn_status_t reorder_batch(const int32_t *num_scheduled, const int32_t *num_computed,
                             int64_t num_reqs, int32_t threshold, ReorderResult *out);

vattn_status_t make_local_attention_virtual_batches(int32_t chunk, const Metadata &m,
                                                    int32_t block_size, Metadata *out);

// maybe_create_ubatch_slices (unpadded and padded).
vattn_status_t make_ubatch_slices(const int32_t *num_scheduled, int64_t num_reqs,
                                  int64_t num_tokens_padded, int64_t num_reqs_padded,
                                  int32_t num_ubatches, int64_t split_point,
                                  std::vector<vattn_ubatch_slice_t> *out,
                                  std::vector<vattn_ubatch_slice_t> *out_padded);
// _make_metadata_with_slice; `what` names the slice in messages.
vattn_status_t metadata_with_slice(const vattn_ubatch_slice_t &s, const Metadata &m,
                                   const char *what, Metadata *out);

vattn_status_t kv_sharing_fast_prefill(const Metadata &m, Metadata *out);

}  // namespace vattn
