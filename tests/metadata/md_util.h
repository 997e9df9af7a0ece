// md_util.h -- helpers for the metadata tests: random batches as owning
// host arrays, and a RAII handle wrapper.
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "test_util.h"
#include "vattn.h"

namespace mdt {

struct MdDeleter {
  void operator()(vattn_metadata_t *m) const { vattn_metadata_destroy(m); }
};
using MdPtr = std::unique_ptr<vattn_metadata_t, MdDeleter>;

// A batch of host arrays that a vattn_metadata_desc_t can point at.
struct Batch {
  std::vector<int32_t> qsl, seq_lens, block_table;
  std::vector<int64_t> slots;
  int64_t num_reqs = 0, num_actual_tokens = 0, rows = 0, cols = 0;
  int32_t block_size = 0;
  int64_t num_cache_blocks = 0;

  int32_t query_len(int64_t r) const { return qsl[r + 1] - qsl[r]; }
  int64_t real_tokens() const { return qsl[num_reqs]; }

  vattn_metadata_desc_t desc() const {
    vattn_metadata_desc_t d;
    vattn_metadata_desc_init(&d);
    d.num_reqs = num_reqs;
    d.num_actual_tokens = num_actual_tokens;
    d.query_start_loc = qsl.data();
    d.seq_lens = seq_lens.data();
    d.block_table = block_table.data();
    d.block_table_rows = rows;
    d.block_table_cols = cols;
    d.slot_mapping = slots.data();
    d.slot_mapping_len = (int64_t)slots.size();
    d.block_size = block_size;
    d.num_cache_blocks = num_cache_blocks;
    return d;
  }
};

// Batch from query and seq lens: distinct random block ids in
// [0, num_cache_blocks), slots from positions seq_len - query_len + i,
// `pad_tokens` padding tokens (slot -1) at the end.
inline Batch make_batch(std::mt19937_64 &g, const std::vector<int32_t> &qlens,
                        const std::vector<int32_t> &slens, int32_t block_size, int64_t pad_tokens = 0,
                        int64_t extra_cols = 1) {
  Batch b;
  b.num_reqs = (int64_t)qlens.size();
  b.block_size = block_size;
  b.qsl.assign(1, 0);
  for (auto q : qlens) b.qsl.push_back(b.qsl.back() + q);
  b.seq_lens = slens;
  int64_t maxb = 0, total_blocks = 0;
  for (auto s : slens) {
    maxb = std::max<int64_t>(maxb, (s + block_size - 1) / block_size);
    total_blocks += (s + block_size - 1) / block_size;
  }
  b.cols = maxb + extra_cols;
  b.rows = b.num_reqs;
  b.num_cache_blocks = total_blocks + 7;
  std::vector<int32_t> ids((size_t)b.num_cache_blocks);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)i;
  std::shuffle(ids.begin(), ids.end(), g);
  b.block_table.assign((size_t)(b.rows * b.cols), 0);
  size_t next = 0;
  for (int64_t r = 0; r < b.num_reqs; ++r) {
    int64_t nb = (slens[r] + block_size - 1) / block_size;
    for (int64_t c = 0; c < nb; ++c) b.block_table[r * b.cols + c] = ids[next++];
  }
  for (int64_t r = 0; r < b.num_reqs; ++r) {
    int32_t ctx = slens[r] - qlens[r];
    for (int32_t i = 0; i < qlens[r]; ++i) {
      int64_t pos = ctx + i;
      b.slots.push_back((int64_t)b.block_table[r * b.cols + pos / block_size] * block_size +
                        pos % block_size);
    }
  }
  for (int64_t i = 0; i < pad_tokens; ++i) b.slots.push_back(-1);
  b.num_actual_tokens = b.real_tokens() + pad_tokens;
  return b;
}

// Random batch: n requests, query lens in [qmin, qmax], context in [0, cmax].
inline Batch random_batch(std::mt19937_64 &g, int64_t n, int32_t qmin, int32_t qmax, int32_t cmax,
                          int32_t block_size, int64_t pad_tokens = 0) {
  std::vector<int32_t> q, s;
  for (int64_t i = 0; i < n; ++i) {
    int32_t ql = std::uniform_int_distribution<int32_t>(qmin, qmax)(g);
    int32_t ctx = std::uniform_int_distribution<int32_t>(0, cmax)(g);
    q.push_back(ql);
    s.push_back(ql + ctx);
  }
  return make_batch(g, q, s, block_size, pad_tokens);
}

inline MdPtr create(const vattn_metadata_desc_t &d) {
  vattn_metadata_t *m = nullptr;
  vattn_status_t st = vattn_metadata_create(&m, &d);
  EXPECT_EQ(st, VATTN_OK) << vattn_last_error_message();
  return MdPtr(m);
}

inline vattn_metadata_desc_t describe(const vattn_metadata_t *m) {
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  EXPECT_EQ(vattn_metadata_describe(m, &d), VATTN_OK) << vattn_last_error_message();
  return d;
}

template <class T>
std::vector<T> vec(const T *p, int64_t n) {
  return p ? std::vector<T>(p, p + n) : std::vector<T>();
}

}  // namespace mdt
