// merge.cpp -- see merge.h; the per-row math is attention.h merge_row.
#include "backends/cpu/merge.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/attention.h"
#include "backends/cpu/elem.h"
#include "core/tensor.h"

namespace vattn {
namespace cpu {
namespace {

struct View3 {
  char *base;
  int64_t s0, s1, s2, es;
  Elem kind;
  explicit View3(const DLTensor *t)
      : base(tensor_data(t)), s0(tensor_stride(t, 0)), s1(tensor_stride(t, 1)),
        s2(tensor_stride(t, 2)), es(static_cast<int64_t>(dl_dtype_bytes(t->dtype))),
        kind(elem_of_dl(t->dtype)) {}
  char *at(int64_t t, int64_t h) const { return base + (t * s0 + h * s1) * es; }
};

struct View2 {
  float *base;
  int64_t s0, s1;
  explicit View2(const DLTensor *t)
      : base(reinterpret_cast<float *>(tensor_data(t))), s0(tensor_stride(t, 0)),
        s1(tensor_stride(t, 1)) {}
  float &at(int64_t h, int64_t t) const { return base[h * s0 + t * s1]; }
};

constexpr int64_t kTokensPerTask = 16;

}  // namespace

void merge_states(DLTensor *output, DLTensor *output_lse, const DLTensor *prefix_output,
                  const DLTensor *prefix_lse, const DLTensor *suffix_output,
                  const DLTensor *suffix_lse, const ThreadPool &pool) {
  const int64_t T = output->shape[0], H = output->shape[1], D = output->shape[2];
  const View3 out(output), po(prefix_output), so(suffix_output);
  const View2 pl(prefix_lse), sl(suffix_lse);
  const bool has_out_lse = output_lse != nullptr;
  const View2 ol(has_out_lse ? output_lse : prefix_lse);  // unused when absent
  const int64_t tasks = (T + kTokensPerTask - 1) / kTokensPerTask;
  pool.parallel_for(tasks, [&](int64_t task) {
    thread_local std::vector<float> a, b;
    if (a.size() < static_cast<size_t>(D)) {
      a.resize(static_cast<size_t>(D));
      b.resize(static_cast<size_t>(D));
    }
    const int64_t t1 = std::min(T, (task + 1) * kTokensPerTask);
    for (int64_t t = task * kTokensPerTask; t < t1; ++t)
      for (int64_t h = 0; h < H; ++h) {
        load_row(po.at(t, h), po.s2, D, po.kind, 1.f, a.data());
        load_row(so.at(t, h), so.s2, D, so.kind, 1.f, b.data());
        const float p = pl.at(h, t), s = sl.at(h, t);
        const float lse = merge_row(a.data(), p, b.data(), s, D, a.data());
        store_row(a.data(), D, out.kind, 1.f, out.at(t, h), out.s2);
        if (has_out_lse) ol.at(h, t) = lse;
      }
  });
}

}  // namespace cpu
}  // namespace vattn
