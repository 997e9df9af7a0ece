// fuzz_util.h -- decoding fuzz input into API arguments.
//
// The harnesses never lie to the library about array lengths (a C API cannot
// check that a pointer really holds n elements): every array passed is
// allocated with exactly the length the call's contract says it reads,
// computed from the declared sizes; only sizes that the library must reject
// before reading anything (negative counts) are passed with shorter arrays.
// Values are mostly small (to reach the deep paths) with a fraction of
// boundary values (INT_MIN/MAX, -1, 0, huge) to hit the checks.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "vattn.h"

namespace fz {

// Dies (a libFuzzer crash) when the library breaks one of its own promises.
#define FZ_REQUIRE(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "contract violated: %s (%s:%d); last error: %s\n", #cond,       \
              __FILE__, __LINE__, vattn_last_error_message());                        \
      abort();                                                                        \
    }                                                                                 \
  } while (0)

// A status must be a pinned code with a message when it is an error.
inline void check_status(vattn_status_t st) {
  FZ_REQUIRE(st >= VATTN_OK && st <= VATTN_ERR_NO_DEVICE);
  FZ_REQUIRE(st != VATTN_ERR_INTERNAL);
  if (st != VATTN_OK) FZ_REQUIRE(vattn_last_error_message()[0] != '\0');
}

struct In {
  FuzzedDataProvider p;
  In(const uint8_t *d, size_t n) : p(d, n) {}

  bool flag() { return p.ConsumeBool(); }
  template <class T>
  T range(T lo, T hi) {
    if (lo > hi) std::swap(lo, hi);
    return p.ConsumeIntegralInRange<T>(lo, hi);
  }

  // Mostly in [lo, hi], sometimes a boundary value of T.
  template <class T>
  T val(T lo, T hi) {
    if (lo > hi) std::swap(lo, hi);
    uint8_t sel = p.ConsumeIntegral<uint8_t>();
    if (sel < 230) return p.ConsumeIntegralInRange<T>(lo, hi);
    switch (sel % 8) {
      case 0: return std::numeric_limits<T>::max();
      case 1: return std::numeric_limits<T>::min();
      case 2: return T(-1);
      case 3: return T(0);
      case 4: return T(std::numeric_limits<T>::max() / 2 + 1);
      case 5: return T(static_cast<std::make_unsigned_t<T>>(hi) + 1u);
      case 6: return T(static_cast<std::make_unsigned_t<T>>(lo) - 1u);
      default: return p.ConsumeIntegral<T>();
    }
  }
  float fval() {
    switch (p.ConsumeIntegralInRange<int>(0, 15)) {
      case 0: return std::numeric_limits<float>::quiet_NaN();
      case 1: return std::numeric_limits<float>::infinity();
      case 2: return -std::numeric_limits<float>::infinity();
      case 3: return 0.f;
      case 4: return -1.f;
      case 5: return 1e30f;
      default: return p.ConsumeFloatingPointInRange<float>(-4.f, 4.f);
    }
  }
  // Picks one of the listed values, or (rarely) anything.
  template <class T>
  T pick(std::initializer_list<T> vals) {
    if (p.ConsumeIntegralInRange<int>(0, 31) == 0) return p.ConsumeIntegral<T>();
    size_t i = p.ConsumeIntegralInRange<size_t>(0, vals.size() - 1);
    return *(vals.begin() + i);
  }
  size_t struct_size(size_t real) {
    switch (p.ConsumeIntegralInRange<int>(0, 40)) {
      case 0: return 0;
      case 1: return real + 8;
      case 2: return real - 4;
      case 3: return 8;
      default: return real;
    }
  }
};

// A batch whose arrays are consistent by construction, then (optionally)
// corrupted in place by a few fuzzer-chosen edits.  Owns every array the
// vattn_metadata_desc_t points at.
struct Batch {
  vattn_metadata_desc_t d{};
  std::vector<int32_t> qsl, seq_lens, computed, block_table, enc, logits, dcp;
  std::vector<int64_t> slots;
  std::vector<int32_t> query_lens;
  int32_t block_size = 16;
  int64_t num_cache_blocks = 64;

  void make(In &in, int max_reqs = 8, int max_q = 12, int max_ctx = 40) {
    vattn_metadata_desc_init(&d);
    int64_t n = in.range<int64_t>(0, max_reqs);
    block_size = in.pick<int32_t>({1, 2, 4, 8, 16, 16, 16, 32});
    if (block_size <= 0 || block_size > 64) block_size = 16;
    num_cache_blocks = in.range<int64_t>(1, 96);
    qsl.assign(n + 1, 0);
    seq_lens.assign(n, 0);
    query_lens.assign(n, 0);
    int64_t cols = 1;
    for (int64_t r = 0; r < n; ++r) {
      int32_t q = in.range<int32_t>(0, max_q);
      if (in.range<int>(0, 3) == 0) q = 1;  // plenty of decodes
      int32_t ctx = in.range<int32_t>(0, max_ctx);
      query_lens[r] = q;
      qsl[r + 1] = qsl[r] + q;
      seq_lens[r] = q + ctx;
      cols = std::max<int64_t>(cols, (seq_lens[r] + block_size - 1) / block_size);
    }
    int64_t rows = n + in.range<int64_t>(0, 2);
    block_table.assign(rows * cols, 0);
    for (auto &b : block_table) b = in.range<int32_t>(0, int32_t(num_cache_blocks - 1));
    int64_t tokens = qsl[n];
    int64_t pad = in.range<int64_t>(0, 4);
    slots.assign(tokens + pad, VATTN_PAD_SLOT_ID);
    for (int64_t r = 0; r < n; ++r) {
      int32_t ctx = seq_lens[r] - query_lens[r];
      for (int32_t i = 0; i < query_lens[r]; ++i) {
        int64_t pos = ctx + i;
        slots[qsl[r] + i] =
            int64_t(block_table[r * cols + pos / block_size]) * block_size + pos % block_size;
      }
    }
    d.num_reqs = n;
    d.num_actual_tokens = tokens + pad;
    d.query_start_loc = qsl.data();
    d.seq_lens = seq_lens.data();
    d.block_table = block_table.data();
    d.block_table_rows = rows;
    d.block_table_cols = cols;
    d.slot_mapping = slots.data();
    d.slot_mapping_len = int64_t(slots.size());
    d.block_size = in.flag() ? block_size : 0;
    d.num_cache_blocks = in.flag() ? num_cache_blocks : 0;
    d.causal = in.range<int>(0, 7) ? 1 : 0;
    if (in.flag()) {
      computed.resize(n);
      for (int64_t r = 0; r < n; ++r) computed[r] = seq_lens[r] - query_lens[r];
      d.num_computed_tokens = computed.data();
    }
    if (in.range<int>(0, 5) == 0) {
      enc.resize(n);
      for (auto &e : enc) e = in.range<int32_t>(0, int32_t(cols * block_size));
      d.encoder_seq_lens = enc.data();
    }
    if (tokens > 0 && in.range<int>(0, 5) == 0) {
      logits.resize(in.range<size_t>(0, 16));
      for (auto &l : logits) l = in.range<int32_t>(0, int32_t(std::max<int64_t>(tokens, 1) - 1));
      d.logits_indices_padded = logits.data();
      d.logits_indices_len = int64_t(logits.size());
      d.num_logits_indices = in.range<int64_t>(0, d.logits_indices_len);
    }
    if (in.range<int>(0, 5) == 0) {
      dcp.resize(n);
      for (int64_t r = 0; r < n; ++r) dcp[r] = in.range<int32_t>(0, seq_lens[r]);
      d.dcp_local_seq_lens = dcp.data();
    }
    if (in.flag()) {
      int32_t mq = 0, ms = 0;
      for (int64_t r = 0; r < n; ++r) {
        mq = std::max(mq, query_lens[r]);
        ms = std::max(ms, seq_lens[r]);
      }
      d.max_query_len = mq + in.range<int32_t>(0, 2);
      d.max_seq_len = ms + in.range<int32_t>(0, 2);
    }
  }

  // A few hostile edits; array lengths stay what the desc declares, or the
  // declared size becomes negative (which must be refused before reading).
  void corrupt(In &in) {
    int edits = in.range<int>(0, 3);
    for (int e = 0; e < edits; ++e) {
      switch (in.range<int>(0, 15)) {
        case 0: if (!qsl.empty()) qsl[in.range<size_t>(0, qsl.size() - 1)] = in.val<int32_t>(-2, 64); break;
        case 1: if (!seq_lens.empty()) seq_lens[in.range<size_t>(0, seq_lens.size() - 1)] = in.val<int32_t>(-2, 64); break;
        case 2: if (!block_table.empty()) block_table[in.range<size_t>(0, block_table.size() - 1)] = in.val<int32_t>(-2, 128); break;
        case 3: if (!slots.empty()) slots[in.range<size_t>(0, slots.size() - 1)] = in.val<int64_t>(-2, 4096); break;
        case 4: d.num_actual_tokens = in.val<int64_t>(0, std::min<int64_t>(std::max<int64_t>(d.num_actual_tokens, 0), 1 << 20) + 2); break;
        case 5: d.max_query_len = in.val<int32_t>(-1, 64); break;
        case 6: d.max_seq_len = in.val<int32_t>(-1, 64); break;
        case 7: d.block_size = in.val<int32_t>(0, 32); break;
        case 8: d.num_cache_blocks = in.val<int64_t>(0, 128); break;
        case 9: if (!computed.empty()) computed[in.range<size_t>(0, computed.size() - 1)] = in.val<int32_t>(-1, 64); break;
        case 10: if (in.flag()) d.num_reqs = -in.range<int64_t>(1, INT64_MAX); else d.block_table_rows = -1; break;
        case 11: d.struct_size = in.struct_size(sizeof d); break;
        case 12: if (in.flag()) d.query_start_loc = nullptr; else d.seq_lens = nullptr; break;
        case 13: if (in.flag()) d.block_table = nullptr; else d.slot_mapping = nullptr; break;
        case 14: d.num_logits_indices = in.val<int64_t>(0, d.logits_indices_len); break;
        case 15: if (!dcp.empty()) dcp[in.range<size_t>(0, dcp.size() - 1)] = in.val<int32_t>(-1, 64); break;
      }
    }
    // Keep declared lengths <= allocations (shrinking is allowed).
    if (d.num_reqs > 0 && d.num_reqs > int64_t(seq_lens.size())) d.num_reqs = int64_t(seq_lens.size());
  }
};

}  // namespace fz
