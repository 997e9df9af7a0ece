// v0_builder.h -- vLLM v0 CommonMetadataBuilder: sequences are added one by
// one (_add_seq_group), then build() renders the batch (prefills first).
#pragma once

#include <cstdint>
#include <vector>

#include "metadata/v0/v0_metadata.h"
#include "vattn.h"

namespace vattn {

class V0Builder {
 public:
  explicit V0Builder(const vattn_v0_builder_options_t &opts) : opts_(opts) {}
  // Checks `s` and appends its context length, block table and slots;
  // the builder is unchanged on failure.
  vattn_status_t add_seq(const vattn_v0_seq_t &s);
  // Renders the batch into `out` and resets the builder (only on success).
  vattn_status_t build(const int32_t *seq_lens, const int32_t *query_lens, int64_t num_seqs,
                       int64_t cuda_graph_pad_size, int64_t batch_size, V0Metadata *out);
  int64_t num_added() const { return (int64_t)context_lens_.size(); }

 private:
  void reset();
  vattn_v0_builder_options_t opts_;
  std::vector<int64_t> slot_mapping_;
  std::vector<int32_t> prefill_seq_lens_, context_lens_, curr_seq_lens_;
  std::vector<std::vector<int32_t>> block_tables_;
  int64_t num_prefills_ = 0, num_prefill_tokens_ = 0, num_decode_tokens_ = 0;
};

}  // namespace vattn

struct vattn_v0_builder {
  explicit vattn_v0_builder(const vattn_v0_builder_options_t &o) : impl(o) {}
  vattn::V0Builder impl;
};
