// Header section 3, bad inputs: every invalid spec field, limits field and
// pointer is rejected with VATTN_ERR_INVALID_ARGUMENT, a message naming the
// argument and the field, and untouched outputs.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct BadSpec {
  const char *what;                               // the field (message needle)
  std::function<void(vattn_kv_cache_spec_t &)> mutate;
};

std::vector<BadSpec> bad_specs() {
  using S = vattn_kv_cache_spec_t;
  return {
      {"kind", [](S &s) { s.kind = -1; }},
      {"kind", [](S &s) { s.kind = 6; }},
      {"block_size", [](S &s) { s.block_size = 0; }},
      {"block_size", [](S &s) { s.block_size = -16; }},
      {"num_kv_heads", [](S &s) { s.num_kv_heads = 0; }},
      {"num_kv_heads", [](S &s) { s.num_kv_heads = -8; }},
      {"head_size", [](S &s) { s.head_size = 0; }},
      {"head_size", [](S &s) { s.head_size = INT32_MIN; }},
      {"dtype", [](S &s) { s.dtype = 0; }},
      {"dtype", [](S &s) { s.dtype = 7; }},
      {"dtype", [](S &s) { s.dtype = -3; }},
      {"num_kv_heads", [](S &s) { s.kind = VATTN_KV_SPEC_MLA; s.num_kv_heads = 2; }},
      {"mla_fp8_ds", [](S &s) { s.mla_fp8_ds = 2; }},
      {"mla_fp8_ds", [](S &s) { s.mla_fp8_ds = 1; }},  // not MLA
      {"dtype", [](S &s) { s.kind = VATTN_KV_SPEC_MLA; s.num_kv_heads = 1; s.head_size = 576; s.mla_fp8_ds = 1; }},
      {"head_size", [](S &s) {
         s.kind = VATTN_KV_SPEC_MLA; s.num_kv_heads = 1; s.head_size = 512; s.dtype = VATTN_DTYPE_UINT8;
         s.mla_fp8_ds = 1; }},
      {"sliding_window", [](S &s) { s.sliding_window = -1; }},
      {"sliding_window", [](S &s) { s.kind = VATTN_KV_SPEC_SLIDING_WINDOW; }},
      {"sliding_window", [](S &s) { s.kind = VATTN_KV_SPEC_CROSS_ATTENTION; s.sliding_window = 64; }},
      {"sliding_window", [](S &s) { s.kind = VATTN_KV_SPEC_MLA; s.num_kv_heads = 1; s.sliding_window = 64; }},
      {"attention_chunk_size", [](S &s) { s.attention_chunk_size = -1; }},
      {"attention_chunk_size", [](S &s) { s.kind = VATTN_KV_SPEC_CHUNKED_LOCAL; }},
      {"attention_chunk_size", [](S &s) {
         s.kind = VATTN_KV_SPEC_SLIDING_WINDOW; s.sliding_window = 8; s.attention_chunk_size = 64; }},
      {"cannot both be set", [](S &s) { s.sliding_window = 8; s.attention_chunk_size = 64; }},
      {"page_size_padded", [](S &s) { s.page_size_padded = -1; }},
      {"page_size_padded", [](S &s) { s.page_size_padded = 65535; }},
      {"overflows", [](S &s) {
         s.block_size = INT32_MAX; s.num_kv_heads = INT32_MAX; s.head_size = INT32_MAX;
         s.dtype = VATTN_DTYPE_FLOAT32; }},
      {"struct_size", [](S &s) { s.struct_size = 0; }},
      {"struct_size", [](S &s) { s.struct_size = sizeof(S) - 8; }},
      {"struct_size", [](S &s) { s.struct_size = sizeof(S) + 8; }},
  };
}

TEST(KvSpecBad, PageSizeRejectsEveryBadField) {
  for (const BadSpec &b : bad_specs()) {
    vattn_kv_cache_spec_t s;
    vattn_kv_cache_spec_init(&s);
    b.mutate(s);
    int64_t out = -4242;
    EXPECT_VATTN_ERR(vattn_kv_cache_spec_page_size_bytes(&s, &out), VATTN_ERR_INVALID_ARGUMENT, b.what);
    EXPECT_NE(std::string(vattn_last_error_message()).find("'spec'"), std::string::npos)
        << vattn_last_error_message();
    EXPECT_EQ(out, -4242) << b.what;
  }
}

TEST(KvSpecBad, MaxMemoryRejectsEveryBadField) {
  for (const BadSpec &b : bad_specs()) {
    vattn_kv_cache_spec_t s;
    vattn_kv_cache_spec_init(&s);
    b.mutate(s);
    int64_t out = -4242;
    EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(&s, nullptr, &out),
                     VATTN_ERR_INVALID_ARGUMENT, b.what);
    EXPECT_EQ(out, -4242) << b.what;
  }
}

TEST(KvSpecBad, MergeNamesTheBadElement) {
  for (const BadSpec &b : bad_specs()) {
    std::vector<vattn_kv_cache_spec_t> v(3);
    for (auto &s : v) vattn_kv_cache_spec_init(&s);
    b.mutate(v[1]);
    vattn_kv_cache_spec_t out;
    vattn_kv_cache_spec_init(&out);
    out.block_size = 777;
    EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(v.data(), v.size(), &out), VATTN_ERR_INVALID_ARGUMENT,
                     b.what);
    EXPECT_NE(std::string(vattn_last_error_message()).find("specs[1]"), std::string::npos)
        << vattn_last_error_message();
    EXPECT_EQ(out.block_size, 777);
  }
}

TEST(KvSpecBad, NullPointersAndCounts) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  int64_t out = -1;
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_page_size_bytes(nullptr, &out), VATTN_ERR_INVALID_ARGUMENT, "'spec'");
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_page_size_bytes(&s, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(nullptr, nullptr, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "'spec'");
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(&s, nullptr, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_EQ(out, -1);

  vattn_kv_cache_spec_t m;
  vattn_kv_cache_spec_init(&m);
  m.head_size = 999;
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(nullptr, 2, &m), VATTN_ERR_INVALID_ARGUMENT, "'specs'");
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(&s, 0, &m), VATTN_ERR_INVALID_ARGUMENT, "'num_specs'");
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(&s, SIZE_MAX, &m), VATTN_ERR_INVALID_ARGUMENT, "'num_specs'");
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(&s, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_EQ(m.head_size, 999);
  // The output struct's struct_size is checked too.
  m.struct_size = 0;
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(&s, 1, &m), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  m.struct_size = sizeof m + 16;
  EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(&s, 1, &m), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(m.head_size, 999);
}

TEST(KvSpecBad, LimitsRejectEveryBadField) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  using L = vattn_model_limits_t;
  const std::vector<std::pair<const char *, std::function<void(L &)>>> cases = {
      {"max_model_len", [](L &l) { l.max_model_len = 0; }},
      {"max_model_len", [](L &l) { l.max_model_len = -5; }},
      {"max_num_batched_tokens", [](L &l) { l.max_num_batched_tokens = 0; }},
      {"max_num_batched_tokens", [](L &l) { l.max_num_batched_tokens = INT64_MIN; }},
      {"max_encoder_len", [](L &l) { l.max_encoder_len = -1; }},
      {"dcp_world_size", [](L &l) { l.dcp_world_size = 0; }},
      {"pcp_world_size", [](L &l) { l.pcp_world_size = -2; }},
      {"struct_size", [](L &l) { l.struct_size = 0; }},
      {"struct_size", [](L &l) { l.struct_size = sizeof(L) + 1; }},
  };
  for (const auto &c : cases) {
    L l;
    vattn_model_limits_init(&l);
    c.second(l);
    int64_t out = -4242;
    EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(&s, &l, &out),
                     VATTN_ERR_INVALID_ARGUMENT, c.first);
    EXPECT_NE(std::string(vattn_last_error_message()).find("'limits'"), std::string::npos);
    EXPECT_EQ(out, -4242);
  }
}

}  // namespace
