// spec_decode_api.cpp -- header section 8: query/output views for
// speculative decoding ([T, H, D] <-> [B, T/B, H, D]).  Views share data,
// keep the caller's strides, and point shape/strides at caller buffers.
#include "core/error.h"
#include "core/tensor.h"

using ll = long long;

namespace {

// out = src's data/device/dtype/offset with the given shape and strides.
void make_view(const DLTensor *src, int ndim, const int64_t *shape, const int64_t *strides,
               DLTensor *out, int64_t *shape_buf, int64_t *strides_buf) {
  for (int i = 0; i < ndim; ++i) {
    shape_buf[i] = shape[i];
    strides_buf[i] = strides[i];
  }
  DLTensor v = *src;
  v.ndim = ndim;
  v.shape = shape_buf;
  v.strides = strides_buf;
  *out = v;
}

}  // namespace

extern "C" {

VATTN_API vattn_status_t vattn_reshape_query_for_spec_decode(const DLTensor *query,
                                                             int64_t batch_size, DLTensor *out,
                                                             int64_t *shape_buf,
                                                             int64_t *strides_buf) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(query);
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_NOT_NULL(shape_buf);
    VATTN_CHECK_NOT_NULL(strides_buf);
    VATTN_TRY(vattn::check_tensor_generic(query, "query"));
    VATTN_CHECK_ARG(query->ndim == 3, "argument 'query' must be 3-D [T, H, D], got %s",
                    vattn::shape_string(query).c_str());
    VATTN_CHECK_ARG(batch_size > 0, "argument 'batch_size' = %lld must be positive", (ll)batch_size);
    const int64_t T = query->shape[0];
    VATTN_CHECK_ARG(T % batch_size == 0,
                    "argument 'batch_size' = %lld does not divide the %lld query tokens", (ll)batch_size,
                    (ll)T);
    const int64_t L = T / batch_size;
    const int64_t st = vattn::tensor_stride(query, 0);
    const int64_t shape[4] = {batch_size, L, query->shape[1], query->shape[2]};
    const int64_t strides[4] = {L * st, st, vattn::tensor_stride(query, 1), vattn::tensor_stride(query, 2)};
    make_view(query, 4, shape, strides, out, shape_buf, strides_buf);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_reshape_attn_output_for_spec_decode(const DLTensor *output,
                                                                   DLTensor *out,
                                                                   int64_t *shape_buf,
                                                                   int64_t *strides_buf) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(output);
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_NOT_NULL(shape_buf);
    VATTN_CHECK_NOT_NULL(strides_buf);
    VATTN_TRY(vattn::check_tensor_generic(output, "output"));
    VATTN_CHECK_ARG(output->ndim == 3 || output->ndim == 4,
                    "argument 'output' must be 3-D or 4-D, got %s", vattn::shape_string(output).c_str());
    int64_t st[4];
    for (int i = 0; i < output->ndim; ++i) st[i] = vattn::tensor_stride(output, i);
    if (output->ndim == 3) {
      make_view(output, 3, output->shape, st, out, shape_buf, strides_buf);
      return VATTN_OK;
    }
    const int64_t B = output->shape[0], L = output->shape[1];
    // [B, L] merge into one dim only when B steps over L rows exactly.
    VATTN_CHECK_ARG(B <= 1 || L <= 1 || st[0] == L * st[1],
                    "argument 'output': strides (%lld, %lld) of dims [B, L] cannot be merged into one "
                    "dimension",
                    (ll)st[0], (ll)st[1]);
    const int64_t shape[3] = {B * L, output->shape[2], output->shape[3]};
    const int64_t strides[3] = {L == 1 ? st[0] : st[1], st[2], st[3]};
    make_view(output, 3, shape, strides, out, shape_buf, strides_buf);
    return VATTN_OK;
  });
}

}  // extern "C"
