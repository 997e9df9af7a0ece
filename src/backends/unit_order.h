// unit_order.h -- the order in which the CUDA backend's persistent Hopper
// kernel (kernels/attention_sm90.cuh) claims its units of work.
//
// A unit is one general item (a query tile against a key range) for one KV
// head: unit = item * kv_heads + kv head.  Units of one request and KV
// head read the same keys, so the order groups them -- units running side by
// side then share their K / V in L2 -- but only within classes of similar
// length (keys in [2^c, 2^(c+1))), longest class first, so the CTAs that
// claim units one after another still finish together:
//   class descending, then request ascending, then KV head, then item order
//   (the builder lists items longest first).
// H100, 16 x 1024 causal prefill: with the longest-first order alone 75% of
// the L2 reads missed to DRAM; with this order 33%.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vattn {

// units[0, n * kv_heads) = a permutation of [0, n * kv_heads) in the order
// above.  Item i's request is the int32 at byte offset i * req_stride from
// req (so the builder passes its item records' req field without a copy);
// keys[i] >= 0: keys it visits.  Returns false (units untouched) only when
// its scratch cannot be allocated.
bool unit_order(const void *req, size_t req_stride, const int64_t *keys, int64_t n, int32_t kv_heads,
                int32_t *units);

}  // namespace vattn
