// fuzz_slot_mapping -- v1 vattn_slot_mapping_compute and the v0
// start_idx / compute pair on fuzzed block tables, positions and sizes.
#include <algorithm>

#include "fuzz_util.h"

namespace {

void v1(fz::In &in) {
  vattn_slot_mapping_args_t a;
  vattn_slot_mapping_args_init(&a);
  int64_t n = in.range<int64_t>(0, 8);
  int64_t rows = n + in.range<int64_t>(0, 2);
  int64_t stride = in.range<int64_t>(1, 8);
  std::vector<int32_t> table(rows * stride), nbpr(rows), qsl(n + 1, 0);
  int64_t ncb = in.val<int64_t>(1, 64);
  for (auto &b : table) b = in.val<int32_t>(0, 63);
  for (auto &x : nbpr) x = in.val<int32_t>(0, int32_t(stride));
  for (int64_t r = 0; r < n; ++r) qsl[r + 1] = qsl[r] + in.range<int32_t>(0, 6);
  if (in.range<int>(0, 7) == 0) qsl[in.range<int64_t>(0, n)] = in.val<int32_t>(-1, 48);
  int32_t bs = in.val<int32_t>(1, 16);
  int64_t tokens = std::max<int32_t>(0, std::min<int32_t>(qsl[n], 256));
  std::vector<int64_t> pos(tokens);
  for (auto &p : pos) p = in.val<int64_t>(0, int64_t(stride) * (bs > 0 && bs < 64 ? bs : 16));
  a.block_table = in.range<int>(0, 31) ? table.data() : nullptr;
  a.num_rows = rows;
  a.row_stride = stride;
  a.num_blocks_per_row = in.flag() ? nbpr.data() : nullptr;
  a.query_start_loc = qsl.data();
  a.num_reqs = n;
  a.positions = pos.data();
  a.num_tokens = tokens;
  a.block_size = bs;
  a.num_cache_blocks = ncb;
  a.cp_world_size = in.range<int>(0, 7) ? 1 : in.val<int32_t>(1, 4);
  a.cp_rank = in.range<int>(0, 7) ? 0 : in.val<int32_t>(0, 3);
  a.cp_interleave = in.range<int>(0, 7) ? 1 : in.val<int32_t>(1, 4);
  switch (in.range<int>(0, 15)) {  // hostile size edits (arrays still cover them)
    case 0: a.num_rows = in.range<int64_t>(INT64_MIN, -1); break;
    case 1: a.row_stride = in.range<int64_t>(INT64_MIN, 0); break;
    case 2: a.num_reqs = in.range<int64_t>(INT64_MIN, -1); break;
    case 3: a.num_tokens = in.range<int64_t>(INT64_MIN, -1); break;
    case 4: a.num_tokens = std::max<int64_t>(0, tokens - 1); break;
    case 5: a.num_rows = std::max<int64_t>(0, n - 1); break;
    case 6: a.struct_size = in.struct_size(sizeof a); break;
    case 7: a.num_cache_blocks = in.val<int64_t>(0, 64); break;
    default: break;
  }
  int64_t cap = tokens + in.range<int64_t>(0, 4);
  std::vector<int64_t> out(cap + 1, 12345);
  int64_t out_len = in.range<int>(0, 7) ? cap : in.range<int64_t>(INT64_MIN, cap);
  vattn_status_t st = vattn_slot_mapping_compute(in.range<int>(0, 63) ? &a : nullptr,
                                                 in.range<int>(0, 63) ? out.data() : nullptr,
                                                 out_len);
  fz::check_status(st);
  if (st == VATTN_OK) {
    for (int64_t i = 0; i < out_len; ++i) {
      int64_t s = out[i];
      // s < num_cache_blocks * block_size, without the product (hostile
      // sizes overflow it).
      const bool in_cache = a.num_cache_blocks == 0 ||
                            (a.block_size > 0 && s / a.block_size < a.num_cache_blocks);
      FZ_REQUIRE(s == VATTN_PAD_SLOT_ID || (s >= 0 && in_cache) || a.cp_world_size > 1);
    }
  } else {
    // "nothing written" on failure
    for (int64_t i = 0; i < cap; ++i) FZ_REQUIRE(out[i] == 12345);
  }
}

void v0(fz::In &in) {
  {
    int64_t out = 777;
    vattn_status_t st = vattn_slot_mapping_v0_start_idx(
        in.range<int32_t>(0, 1), in.val<int64_t>(0, 64), in.val<int64_t>(0, 64),
        in.val<int64_t>(0, 64), in.range<int>(0, 63) ? &out : nullptr);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(out >= 0);
  }
  {
    int64_t tlen = in.range<int64_t>(0, 8);
    std::vector<int32_t> table(tlen);
    for (auto &b : table) b = in.val<int32_t>(0, 63);
    int64_t cap = in.range<int64_t>(0, 96);
    std::vector<int64_t> out(cap + 1, 12345);
    int64_t out_len = in.range<int>(0, 7) ? in.range<int64_t>(0, cap) : in.val<int64_t>(0, cap);
    int64_t before = out_len;
    int32_t bs = in.val<int32_t>(1, 16);
    vattn_status_t st = vattn_slot_mapping_v0_compute(
        in.range<int32_t>(0, 1), in.val<int64_t>(0, 96), in.val<int64_t>(0, 96),
        in.val<int64_t>(0, 96), bs, in.range<int>(0, 15) ? table.data() : nullptr, tlen,
        in.val<int64_t>(0, 64), out.data(), cap, &out_len);
    fz::check_status(st);
    if (st == VATTN_OK) {
      FZ_REQUIRE(out_len >= before && out_len <= cap);
    } else {
      FZ_REQUIRE(out_len == before);
      for (int64_t i = 0; i < cap; ++i) FZ_REQUIRE(out[i] == 12345);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz::In in(data, size);
  if (in.flag()) v1(in); else v0(in);
  return 0;
}
