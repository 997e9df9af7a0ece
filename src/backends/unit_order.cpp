// unit_order.cpp -- see unit_order.h.
#include "backends/unit_order.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace vattn {

bool unit_order(const void *req, size_t req_stride, const int64_t *keys, int64_t n, int32_t kv_heads,
                int32_t *units) {
  auto rq = [&](int64_t i) {
    int32_t r;
    std::memcpy(&r, static_cast<const char *>(req) + static_cast<size_t>(i) * req_stride, sizeof(r));
    return r;
  };
  try {
    std::vector<int8_t> cls(static_cast<size_t>(n));
    int32_t max_req = 0;
    bool small_reqs = true;  // request ids in [0, 4n + 1024): two counting sorts
    for (int64_t i = 0; i < n; ++i) {
      int8_t c = 0;  // floor(log2(keys)), 0 for 0 or 1 key
      for (int64_t k = keys[i]; k > 1; k >>= 1) ++c;
      cls[i] = c;
      const int32_t r = rq(i);
      if (r < 0 || r >= 4 * n + 1024) small_reqs = false;
      max_req = std::max(max_req, r);
    }
    std::vector<int32_t> idx(static_cast<size_t>(n));
    if (small_reqs) {
      // Stable counting sorts, request ascending, then class descending (the
      // last pass decides): class, then request, then item order.
      std::vector<int32_t> by_req(static_cast<size_t>(n));
      std::vector<int32_t> count(static_cast<size_t>(max_req) + 2, 0);
      for (int64_t i = 0; i < n; ++i) ++count[rq(i) + 1];
      for (size_t r = 1; r < count.size(); ++r) count[r] += count[r - 1];
      for (int64_t i = 0; i < n; ++i) by_req[count[rq(i)]++] = static_cast<int32_t>(i);
      int32_t ccount[65] = {0};  // classes 63 .. 0 -> buckets 0 .. 63
      for (int64_t i = 0; i < n; ++i) ++ccount[63 - cls[i] + 1];
      for (int c = 1; c < 65; ++c) ccount[c] += ccount[c - 1];
      for (int64_t j = 0; j < n; ++j) {
        const int32_t i = by_req[j];
        idx[ccount[63 - cls[i]]++] = i;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) idx[i] = static_cast<int32_t>(i);
      std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
        if (cls[a] != cls[b]) return cls[a] > cls[b];
        return rq(a) < rq(b);
      });
    }
    int64_t u = 0;
    for (int64_t s = 0; s < n;) {  // segments of one (class, request)
      int64_t e = s + 1;
      while (e < n && cls[idx[e]] == cls[idx[s]] && rq(idx[e]) == rq(idx[s])) ++e;
      for (int32_t h = 0; h < kv_heads; ++h)
        for (int64_t i = s; i < e; ++i) units[u++] = idx[i] * kv_heads + h;
      s = e;
    }
    return true;
  } catch (const std::bad_alloc &) {
    return false;
  }
}

}  // namespace vattn
