// unit_order.cpp -- see unit_order.h.
#include "backends/unit_order.h"

#include <algorithm>
#include <new>
#include <vector>

namespace vattn {

bool unit_order(const int32_t *req, const int64_t *keys, int64_t n, int32_t kv_heads, int32_t *units) {
  try {
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::vector<int8_t> cls(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      idx[i] = static_cast<int32_t>(i);
      int8_t c = 0;  // floor(log2(keys)), 0 for 0 or 1 key
      for (int64_t k = keys[i]; k > 1; k >>= 1) ++c;
      cls[i] = c;
    }
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
      if (cls[a] != cls[b]) return cls[a] > cls[b];
      return req[a] < req[b];
    });
    int64_t u = 0;
    for (int64_t s = 0; s < n;) {  // segments of one (class, request)
      int64_t e = s + 1;
      while (e < n && cls[idx[e]] == cls[idx[s]] && req[idx[e]] == req[idx[s]]) ++e;
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
