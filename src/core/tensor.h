// tensor.h -- validation of borrowed DLPack tensors and strided access.
//
// Every DLTensor that crosses the C API is checked here before use: device,
// dtype, ndim, shape (non-negative, product without overflow), strides (NULL
// = compact row-major; negative strides are rejected), byte_offset
// (element-aligned) and data (non-NULL unless the tensor is empty).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/error.h"

namespace vattn {

// Maps VATTN_DTYPE_* to the DLPack dtype used to carry it (fp8 -> uint8).
bool dl_dtype_of(int32_t vattn_dtype, DLDataType *out);
// Human-readable dtype ("float16", "uint8", ...); static storage.
const char *dl_dtype_name(DLDataType t);
const char *vattn_dtype_name(int32_t vattn_dtype);
bool dl_dtype_equal(DLDataType a, DLDataType b);
size_t dl_dtype_bytes(DLDataType t);

// What a tensor argument must be.  -1 in `shape` means any extent; an
// empty dims list means any ndim (then only generic checks run).
struct TensorReq {
  int32_t device_type = -1;  // kDLCPU / kDLCUDA; -1 = CPU or CUDA
  int32_t device_id = -1;    // -1 = any
  int32_t ndim = -1;         // -1 = any
  const int64_t *shape = nullptr;  // [ndim] with -1 wildcards, or NULL
  bool check_dtype = false;
  DLDataType dtype{};
  bool require_contiguous = false;  // compact row-major
  bool allow_null = false;          // the pointer itself may be NULL
};

// Validates `t` against `req`; the message names `name`.
vattn_status_t check_tensor(const DLTensor *t, const char *name, const TensorReq &req);

// Generic checks only (device CPU/CUDA, shape >= 0, strides >= 0, offset
// aligned, data non-NULL when non-empty, no size overflow).
vattn_status_t check_tensor_generic(const DLTensor *t, const char *name);

// Element stride of dim i (compact row-major when strides == NULL).
int64_t tensor_stride(const DLTensor *t, int i);
int64_t tensor_numel(const DLTensor *t);
bool tensor_is_contiguous(const DLTensor *t);
// Base address including byte_offset.
inline char *tensor_data(const DLTensor *t) {
  return static_cast<char *>(t->data) + t->byte_offset;
}
// Largest byte address touched + 1 relative to tensor_data (0 if empty).
int64_t tensor_span_bytes(const DLTensor *t);
// "[a, b, c]" for messages.
std::string shape_string(const DLTensor *t);

}  // namespace vattn
