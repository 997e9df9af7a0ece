// slot_mapping_device_api.cpp -- header section 6: the v1 slot mapping over
// DLPack tensors, dispatched on their device (CPU: the host rule of
// vattn_slot_mapping_compute; CUDA: an asynchronous kernel that writes -1
// for the tokens the host variant would reject).
#include <climits>

#include "backends/cpu/slot_mapping_tensors.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/tensor.h"
#include "metadata/metadata.h"
#ifdef VATTN_WITH_CUDA
#include "backends/cuda/cuda_backend_impl.h"
#endif

using ll = long long;

namespace {

vattn_status_t check_one(const DLTensor *t, const char *name, int32_t ndim, DLDataType dt,
                         bool contiguous) {
  VATTN_TRY(vattn::check_tensor_generic(t, name));
  VATTN_CHECK_ARG(t->ndim == ndim, "tensor '%s': ndim %d, expected %d", name, (int)t->ndim, ndim);
  VATTN_CHECK_ARG(vattn::dl_dtype_equal(t->dtype, dt), "tensor '%s': dtype %s, expected %s", name,
                  vattn::dl_dtype_name(t->dtype), vattn::dl_dtype_name(dt));
  if (contiguous)
    VATTN_CHECK_ARG(vattn::tensor_is_contiguous(t), "tensor '%s': must be contiguous", name);
  return VATTN_OK;
}

bool on_cpu(const DLTensor *t) {
  return t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost;
}

}  // namespace

extern "C" {

VATTN_API vattn_status_t vattn_slot_mapping_compute_tensors(const DLTensor *block_table,
                                                            const DLTensor *query_start_loc,
                                                            const DLTensor *positions,
                                                            DLTensor *slot_mapping,
                                                            int32_t block_size,
                                                            int64_t num_cache_blocks,
                                                            void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(block_table);
    VATTN_CHECK_NOT_NULL(query_start_loc);
    VATTN_CHECK_NOT_NULL(positions);
    VATTN_CHECK_NOT_NULL(slot_mapping);
    const DLDataType i32{kDLInt, 32, 1}, i64{kDLInt, 64, 1};
    VATTN_TRY(check_one(block_table, "block_table", 2, i32, false));
    VATTN_TRY(check_one(query_start_loc, "query_start_loc", 1, i32, true));
    VATTN_TRY(check_one(positions, "positions", 1, i64, true));
    VATTN_TRY(check_one(slot_mapping, "slot_mapping", 1, i64, true));
    VATTN_CHECK_ARG(block_size > 0, "argument 'block_size' = %d must be positive", block_size);
    VATTN_CHECK_ARG(num_cache_blocks >= 0 && num_cache_blocks <= vattn::kMaxArrayElems,
                    "argument 'num_cache_blocks' = %lld is out of range", (ll)num_cache_blocks);
    const int64_t rows = block_table->shape[0], cols = block_table->shape[1];
    VATTN_CHECK_ARG(cols <= 1 || vattn::tensor_stride(block_table, 1) == 1,
                    "tensor 'block_table': the last dim must be contiguous");
    const int64_t bt_stride = rows > 1 ? vattn::tensor_stride(block_table, 0) : cols;
    VATTN_CHECK_ARG(rows <= 1 || bt_stride >= cols,
                    "tensor 'block_table': row stride %lld is smaller than its %lld columns",
                    (ll)bt_stride, (ll)cols);
    VATTN_CHECK_ARG(query_start_loc->shape[0] >= 1,
                    "tensor 'query_start_loc': needs num_reqs + 1 >= 1 entries");
    const int64_t num_reqs = query_start_loc->shape[0] - 1;
    VATTN_CHECK_ARG(rows >= num_reqs, "tensor 'block_table': %lld rows < num_reqs = %lld",
                    (ll)rows, (ll)num_reqs);
    const int64_t T = positions->shape[0], len = slot_mapping->shape[0];
    VATTN_CHECK_ARG(T <= vattn::kMaxTokens, "tensor 'positions': %lld tokens is too many", (ll)T);
    VATTN_CHECK_ARG(len >= T, "tensor 'slot_mapping': %lld entries < %lld positions", (ll)len,
                    (ll)T);
    const DLTensor *all[4] = {block_table, query_start_loc, positions, slot_mapping};
    const bool cpu = on_cpu(block_table);
    for (const DLTensor *t : all) {
      VATTN_CHECK_ARG(on_cpu(t) == cpu && (cpu || t->device.device_id == block_table->device.device_id),
                      "tensors 'block_table', 'query_start_loc', 'positions' and 'slot_mapping' "
                      "must be on one device");
    }
    const int32_t *bt = reinterpret_cast<const int32_t *>(vattn::tensor_data(block_table));
    const int32_t *qsl = reinterpret_cast<const int32_t *>(vattn::tensor_data(query_start_loc));
    const int64_t *pos = reinterpret_cast<const int64_t *>(vattn::tensor_data(positions));
    int64_t *out = reinterpret_cast<int64_t *>(vattn::tensor_data(slot_mapping));
    if (cpu)
      return vattn::cpu_slot_mapping_tensors(bt, rows, bt_stride, cols, qsl, num_reqs, pos, T,
                                             block_size, num_cache_blocks, out, len);
#ifdef VATTN_WITH_CUDA
    VATTN_CHECK_ARG(block_table->device.device_type == kDLCUDA,
                    "tensor 'block_table': device type %d is not supported",
                    (int)block_table->device.device_type);
    VATTN_TRY(vattn::cuda_require_device(block_table->device.device_id, "block_table"));
    return vattn::cuda_slot_mapping_tensors(block_table->device.device_id, bt, bt_stride, cols, qsl,
                                            num_reqs, pos, T, block_size, num_cache_blocks, out,
                                            len, stream);
#else
    (void)stream;
    return vattn::fail(VATTN_ERR_NO_DEVICE,
                       "tensor 'block_table' is on device type %d but this build has no CUDA backend",
                       (int)block_table->device.device_type);
#endif
  });
}

}  // extern "C"
