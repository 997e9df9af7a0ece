// merge.h -- merge_attn_states on the host.
#pragma once

#include "core/thread_pool.h"
#include "vattn.h"

namespace vattn {
namespace cpu {

// Tensors already validated (forward_check.h check_merge).  Row by row:
// both inputs are read before the output row is written, so output may be
// the same tensor as prefix_output or suffix_output.
void merge_states(DLTensor *output, DLTensor *output_lse, const DLTensor *prefix_output,
                  const DLTensor *prefix_lse, const DLTensor *suffix_output,
                  const DLTensor *suffix_lse, const ThreadPool &pool);

}  // namespace cpu
}  // namespace vattn
