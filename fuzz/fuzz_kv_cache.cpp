// fuzz_kv_cache -- KV cache specs (page size, max memory usage, merge),
// num_blocks_for_budget, and cache creation with tiny budgets on the CPU
// (then info / groups / per-layer tensors of what was created).
#include <algorithm>

#include "fuzz_util.h"

namespace {

vattn_kv_cache_spec_t make_spec(fz::In &in) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.kind = in.pick<int32_t>({VATTN_KV_SPEC_FULL, VATTN_KV_SPEC_FULL, VATTN_KV_SPEC_SLIDING_WINDOW,
                             VATTN_KV_SPEC_CHUNKED_LOCAL, VATTN_KV_SPEC_MLA,
                             VATTN_KV_SPEC_CROSS_ATTENTION, VATTN_KV_SPEC_ENCODER_ONLY, -1, 6});
  s.block_size = in.val<int32_t>(1, 32);
  s.num_kv_heads = s.kind == VATTN_KV_SPEC_MLA ? in.val<int32_t>(1, 1) : in.val<int32_t>(1, 8);
  s.head_size = in.val<int32_t>(1, 64);
  s.dtype = in.pick<int32_t>({VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16,
                              VATTN_DTYPE_FP8_E4M3, VATTN_DTYPE_FP8_E5M2, VATTN_DTYPE_UINT8, 0});
  s.sliding_window = in.range<int>(0, 3) ? 0 : in.val<int32_t>(1, 64);
  s.attention_chunk_size = in.range<int>(0, 3) ? 0 : in.val<int32_t>(1, 64);
  s.mla_fp8_ds = in.range<int>(0, 7) ? 0 : in.val<int32_t>(0, 1);
  s.page_size_padded = in.range<int>(0, 7) ? 0 : in.val<int64_t>(0, 1 << 16);
  if (in.range<int>(0, 31) == 0) s.struct_size = in.struct_size(sizeof s);
  return s;
}

void spec_calls(fz::In &in, const std::vector<vattn_kv_cache_spec_t> &specs) {
  for (const auto &s : specs) {
    int64_t page = -7;
    vattn_status_t st = vattn_kv_cache_spec_page_size_bytes(&s, &page);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(page > 0);
    else FZ_REQUIRE(page == -7);
    {
      vattn_model_limits_t lim;
      vattn_model_limits_init(&lim);
      lim.max_model_len = in.val<int64_t>(1, 4096);
      lim.max_num_batched_tokens = in.val<int64_t>(1, 4096);
      lim.max_encoder_len = in.val<int64_t>(0, 4096);
      lim.dcp_world_size = in.range<int>(0, 3) ? 1 : in.val<int32_t>(1, 8);
      lim.pcp_world_size = in.range<int>(0, 3) ? 1 : in.val<int32_t>(1, 8);
      if (in.range<int>(0, 31) == 0) lim.struct_size = in.struct_size(sizeof lim);
      int64_t mem = -7;
      st = vattn_kv_cache_spec_max_memory_usage_bytes(&s, in.range<int>(0, 31) ? &lim : nullptr,
                                                      &mem);
      fz::check_status(st);
      if (st == VATTN_OK) FZ_REQUIRE(mem >= 0);
    }
  }
  {
    vattn_kv_cache_spec_t m;
    vattn_kv_cache_spec_init(&m);
    if (in.range<int>(0, 15) == 0) m.struct_size = in.struct_size(sizeof m);
    fz::check_status(vattn_kv_cache_specs_merge(specs.data(), specs.size(), &m));
  }
}

void cache_calls(fz::In &in, const std::vector<vattn_kv_cache_spec_t> &specs) {
  size_t n = specs.size();
  std::vector<int32_t> target(n, -1);
  bool share = in.flag();
  if (share)
    for (size_t i = 0; i < n; ++i)
      if (in.range<int>(0, 2) == 0) target[i] = in.val<int32_t>(-1, int32_t(n));
  {
    int64_t nb = -7;
    fz::check_status(vattn_kv_cache_num_blocks_for_budget(
        specs.data(), share ? target.data() : nullptr, n, in.val<int64_t>(0, 1 << 20), &nb));
  }
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.device_type = in.range<int>(0, 15) ? kDLCPU : in.pick<int32_t>({kDLCUDA, 0, 99});
  o.device_id = in.range<int>(0, 15) ? 0 : in.val<int32_t>(0, 1);
  o.layout = in.range<int>(0, 15) ? in.range<int32_t>(0, 1) : in.val<int32_t>(0, 1);
  o.zero_fill = in.range<int32_t>(0, 1);
  // Tiny budgets only: at most 256 KiB per cache.
  if (in.flag()) {
    o.num_blocks = in.val<int64_t>(1, 8);
  } else {
    o.num_blocks = 0;
    o.memory_budget_bytes = in.val<int64_t>(0, 1 << 18);
  }
  if (in.range<int>(0, 31) == 0) o.struct_size = in.struct_size(sizeof o);
  // Keep real allocations small: refuse to pass anything that could
  // legitimately ask for more than ~64 MiB (that is a valid request, not a bug).
  int64_t total = 0;
  for (const auto &s : specs) {
    int64_t page = 0;
    if (vattn_kv_cache_spec_page_size_bytes(&s, &page) != VATTN_OK) continue;
    if (page > (INT64_C(64) << 20)) return;
    total += page;
  }
  if (o.num_blocks > 0 && total > 0 && o.num_blocks <= (INT64_C(64) << 20) / total) {
  } else if (o.num_blocks > 0) {
    o.num_blocks = 1;
    if (total > (INT64_C(64) << 20)) return;
  } else if (o.memory_budget_bytes > (INT64_C(64) << 20)) {
    o.memory_budget_bytes = 1 << 16;
  }
  vattn_kv_cache_t *c = nullptr;
  vattn_status_t st = vattn_kv_cache_create(&c, specs.data(), share ? target.data() : nullptr, n,
                                            in.range<int>(0, 15) ? &o : nullptr);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (c != nullptr));
  if (!c) return;
  vattn_kv_cache_info_t info;
  info.struct_size = sizeof info;
  FZ_REQUIRE(vattn_kv_cache_get_info(c, &info) == VATTN_OK);
  FZ_REQUIRE(info.num_layers == int32_t(n) && info.num_blocks >= 1);
  for (int k = 0; k < 4; ++k) {
    size_t layer = in.val<size_t>(0, n);
    int32_t g = -1;
    st = vattn_kv_cache_layer_group(c, layer, &g);
    fz::check_status(st);
    FZ_REQUIRE((st == VATTN_OK) == (layer < n));
    if (st == VATTN_OK) {
      vattn_kv_cache_spec_t gs;
      gs.struct_size = sizeof gs;
      FZ_REQUIRE(vattn_kv_cache_group_spec(c, size_t(g), &gs) == VATTN_OK);
    }
    fz::check_status(vattn_kv_cache_group_spec(c, in.val<size_t>(0, n), nullptr));
    DLTensor t;
    st = vattn_kv_cache_layer_tensor(c, layer, &t);
    fz::check_status(st);
    if (st == VATTN_OK && t.data != nullptr) {
      // Touch the first and last byte the tensor spans (ASan checks bounds).
      int64_t last = 0, numel = 1;
      for (int d = 0; d < t.ndim; ++d) {
        numel *= t.shape[d];
        int64_t stride = t.strides ? t.strides[d] : 0;
        if (t.shape[d] > 0) last += (t.shape[d] - 1) * stride;
      }
      if (numel > 0 && t.strides) {
        volatile char *p = static_cast<char *>(t.data) + t.byte_offset;
        size_t esz = t.dtype.bits / 8 * t.dtype.lanes;
        p[0] = p[0];
        p[last * int64_t(esz) + int64_t(esz) - 1] = p[last * int64_t(esz) + int64_t(esz) - 1];
      }
    }
  }
  vattn_kv_cache_destroy(c);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz::In in(data, size);
  size_t n = in.range<size_t>(1, 4);
  std::vector<vattn_kv_cache_spec_t> specs;
  vattn_kv_cache_spec_t first = make_spec(in);
  for (size_t i = 0; i < n; ++i) specs.push_back(i == 0 || in.range<int>(0, 2) ? first : make_spec(in));
  // Same-spec layers with window variations exercise merge.
  for (auto &s : specs)
    if (in.range<int>(0, 5) == 0) s.sliding_window = in.val<int32_t>(0, 64);
  spec_calls(in, specs);
  if (in.flag()) cache_calls(in, specs);
  if (in.range<int>(0, 63) == 0) {
    fz::check_status(vattn_kv_cache_spec_page_size_bytes(nullptr, nullptr));
    fz::check_status(vattn_kv_cache_specs_merge(nullptr, n, nullptr));
  }
  return 0;
}
