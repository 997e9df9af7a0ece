// graph_state.h -- vLLM v0 CommonAttentionState: persistent decode inputs
// for CUDA-graph capture and replay.
//
// Buffers sized for max_batch_size decodes: slot_mapping [max_batch] (PAD),
// seq_lens [max_batch] (1), block_tables [max_batch, max_blocks] (0).  The
// metadata of a captured batch of N views the first N entries / rows;
// prepare_replay copies a real batch into them (the rest return to padding).
#pragma once

#include <cstdint>
#include <vector>

#include "metadata/v0/v0_metadata.h"
#include "vattn.h"

namespace vattn {

class GraphState {
 public:
  GraphState(int64_t max_batch, int32_t max_blocks, int32_t max_seq_len_to_capture);
  // out->view points into this state's buffers.
  vattn_status_t metadata_for_batch(int64_t batch_size, V0Metadata *out) const;
  vattn_status_t prepare_replay(const vattn_v0_metadata_desc_t &md);

 private:
  int64_t max_batch_;
  int32_t max_blocks_, max_seq_len_;
  std::vector<int64_t> slot_mapping_;
  std::vector<int32_t> seq_lens_, block_tables_;
};

}  // namespace vattn

struct vattn_graph_state {
  vattn_graph_state(int64_t b, int32_t m, int32_t s) : impl(b, m, s) {}
  vattn::GraphState impl;
};
