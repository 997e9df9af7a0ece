// cache_write.h -- reshape_and_cache on the host: new K/V rows into the
// paged cache through a slot mapping.
#pragma once

#include <cstdint>

#include "backends/cpu/elem.h"
#include "core/thread_pool.h"
#include "vattn.h"

namespace vattn {
namespace cpu {

// For i < n with slots[i] != -1: token row i of key / value ([>= n, H, D],
// any strides, model dtype) goes to kv_cache[0 / 1, slot / bs, slot % bs]
// (logical (2, num_blocks, bs, H, D), any strides) stored as `store`.
// Same kind: bit-exact copy; fp8: saturate(x / scale).  Slots must already
// be validated.  Two tokens with the same slot: one of them wins.
void write_kv_cache(const DLTensor *key, const DLTensor *value, DLTensor *kv_cache,
                    const int64_t *slots, int64_t n, Elem store, float k_scale, float v_scale,
                    const ThreadPool &pool);

}  // namespace cpu
}  // namespace vattn
