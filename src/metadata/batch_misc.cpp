// batch_misc.cpp -- see batch_misc.h.
#include "metadata/batch_misc.h"

#include <algorithm>

namespace vattn {

namespace {
int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }  // a >= 0, b > 0; no overflow
}  // namespace

bool use_cascade_attention(int64_t common_prefix_len, const int32_t *query_lens, int64_t num_reqs,
                           int32_t num_q_heads, int32_t num_kv_heads, bool use_alibi,
                           bool use_sliding_window, bool use_local_attention, int32_t num_sms,
                           int32_t dcp_world_size) {
  // Too short a prefix, features cascade cannot combine with, too few
  // requests, or a context-parallel decode: never worth it.
  if (common_prefix_len < 256) return false;
  if (use_alibi || use_sliding_window || use_local_attention) return false;
  if (num_reqs < 8) return false;
  if (dcp_world_size > 1) return false;
  const int64_t q_per_kv = num_q_heads / num_kv_heads;
  bool all_single = true;
  for (int64_t r = 0; r < num_reqs && all_single; ++r) all_single = query_lens[r] == 1;
  // Without FlashDecoding's GQA packing the plain kernel has no edge.
  if (!(q_per_kv > 1 && all_single)) return true;
  // Compare estimated waves of CTAs over the prefix tiles.  Exact 128-bit
  // integers: hostile sizes overflow int64 products (found by fuzzing).
  using i128 = __int128;
  auto cdiv128 = [](i128 a, i128 b) { return a / b + (a % b != 0); };
  const i128 tiles = cdiv(common_prefix_len, 128);
  const i128 cascade_ctas = (i128)num_q_heads * cdiv(num_reqs, 128);
  const i128 cascade_time = cdiv128(cascade_ctas, num_sms) * tiles;
  const i128 fd_ctas = (i128)num_reqs * num_kv_heads * cdiv(q_per_kv, 128) * tiles;
  const i128 fd_time = cdiv128(fd_ctas, num_sms);
  return cascade_time < fd_time;
}

std::vector<int64_t> split_prefill_chunks(const int32_t *seq_lens, int64_t num_reqs,
                                          int64_t workspace_size) {
  std::vector<int64_t> bounds;
  int64_t i = 0;
  while (i < num_reqs) {
    int64_t start = i, total = 0;
    while (i < num_reqs && total + seq_lens[i] <= workspace_size) total += seq_lens[i++];
    bounds.push_back(start);
    bounds.push_back(i);
  }
  return bounds;
}

int32_t dcp_local_seq_len(int32_t seq_len, int32_t dcp_size, int32_t rank, int32_t interleave) {
  // Tokens are dealt to ranks in runs of `interleave`: every rank gets
  // `base` full rounds, the remainder goes run by run from rank 0.
  const int64_t base = (int64_t)seq_len / interleave / dcp_size * interleave;
  const int64_t rem = (int64_t)seq_len - base * dcp_size;
  const int64_t extra = std::min<int64_t>(std::max<int64_t>(rem - (int64_t)rank * interleave, 0), interleave);
  return (int32_t)(base + extra);
}

}  // namespace vattn
