// cache_write.cpp -- see cache_write.h.
#include "backends/cpu/cache_write.h"

#include <vector>

#include "core/tensor.h"

namespace vattn {
namespace cpu {
namespace {

constexpr int64_t kTokensPerTask = 64;

}  // namespace

void write_kv_cache(const DLTensor *key, const DLTensor *value, DLTensor *kv_cache,
                    const int64_t *slots, int64_t n, Elem store, float k_scale, float v_scale,
                    const ThreadPool &pool) {
  if (n <= 0) return;
  const Elem src_kind = elem_of_dl(key->dtype);
  const size_t src_es = elem_bytes(src_kind), dst_es = elem_bytes(store);
  const int64_t H = kv_cache->shape[3], D = kv_cache->shape[4], bs = kv_cache->shape[2];
  // Cache element strides: (kv, block, offset, head, dim).
  const int64_t c0 = tensor_stride(kv_cache, 0), c1 = tensor_stride(kv_cache, 1),
                c2 = tensor_stride(kv_cache, 2), c3 = tensor_stride(kv_cache, 3),
                c4 = tensor_stride(kv_cache, 4);
  char *cache = tensor_data(kv_cache);
  const DLTensor *src[2] = {key, value};
  const float scale[2] = {k_scale, v_scale};

  const int64_t tasks = (n + kTokensPerTask - 1) / kTokensPerTask;
  pool.parallel_for(tasks, [&](int64_t task) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(D)) buf.resize(static_cast<size_t>(D));
    const int64_t i0 = task * kTokensPerTask;
    const int64_t i1 = i0 + kTokensPerTask < n ? i0 + kTokensPerTask : n;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t slot = slots[i];
      if (slot < 0) continue;  // padding
      const int64_t blk = slot / bs, off = slot % bs;
      for (int kv = 0; kv < 2; ++kv) {
        const DLTensor *t = src[kv];
        const int64_t s0 = tensor_stride(t, 0), s1 = tensor_stride(t, 1), s2 = tensor_stride(t, 2);
        const char *row_base = tensor_data(t) + i * s0 * static_cast<int64_t>(src_es);
        char *dst_base = cache + (kv * c0 + blk * c1 + off * c2) * static_cast<int64_t>(dst_es);
        for (int64_t h = 0; h < H; ++h) {
          const char *s = row_base + h * s1 * static_cast<int64_t>(src_es);
          char *d = dst_base + h * c3 * static_cast<int64_t>(dst_es);
          if (store == src_kind) {
            copy_row(s, s2, D, src_es, d, c4);
          } else {
            load_row(s, s2, D, src_kind, 1.0f, buf.data());
            store_row(buf.data(), D, store, scale[kv], d, c4);
          }
        }
      }
    }
  });
}

}  // namespace cpu
}  // namespace vattn
