// tensor.cpp -- DLTensor validation helpers.
#include "core/tensor.h"

#include <limits>
#include <string>

namespace vattn {

bool dl_dtype_of(int32_t d, DLDataType *out) {
  switch (d) {
    case VATTN_DTYPE_FLOAT32: *out = DLDataType{kDLFloat, 32, 1}; return true;
    case VATTN_DTYPE_FLOAT16: *out = DLDataType{kDLFloat, 16, 1}; return true;
    case VATTN_DTYPE_BFLOAT16: *out = DLDataType{kDLBfloat, 16, 1}; return true;
    case VATTN_DTYPE_FP8_E4M3:
    case VATTN_DTYPE_FP8_E5M2:
    case VATTN_DTYPE_UINT8: *out = DLDataType{kDLUInt, 8, 1}; return true;
    default: return false;
  }
}

const char *vattn_dtype_name(int32_t d) {
  switch (d) {
    case VATTN_DTYPE_FLOAT32: return "float32";
    case VATTN_DTYPE_FLOAT16: return "float16";
    case VATTN_DTYPE_BFLOAT16: return "bfloat16";
    case VATTN_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case VATTN_DTYPE_FP8_E5M2: return "fp8_e5m2";
    case VATTN_DTYPE_UINT8: return "uint8";
    default: return "unknown";
  }
}

const char *dl_dtype_name(DLDataType t) {
  if (t.lanes != 1) return "vector";
  switch (t.code) {
    case kDLFloat:
      return t.bits == 32 ? "float32" : t.bits == 16 ? "float16" : t.bits == 64 ? "float64" : "float?";
    case kDLBfloat: return t.bits == 16 ? "bfloat16" : "bfloat?";
    case kDLInt:
      return t.bits == 32 ? "int32" : t.bits == 64 ? "int64" : t.bits == 8 ? "int8" : t.bits == 16 ? "int16" : "int?";
    case kDLUInt:
      return t.bits == 8 ? "uint8" : t.bits == 16 ? "uint16" : t.bits == 32 ? "uint32" : t.bits == 64 ? "uint64" : "uint?";
    default: return "unknown";
  }
}

bool dl_dtype_equal(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

size_t dl_dtype_bytes(DLDataType t) { return (static_cast<size_t>(t.bits) * t.lanes + 7) / 8; }

int64_t tensor_stride(const DLTensor *t, int i) {
  if (t->strides) return t->strides[i];
  int64_t s = 1;
  for (int j = t->ndim - 1; j > i; --j) s *= t->shape[j];
  return s;
}

int64_t tensor_numel(const DLTensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

bool tensor_is_contiguous(const DLTensor *t) {
  if (!t->strides) return true;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expect) return false;
    expect *= t->shape[i];
  }
  return true;
}

int64_t tensor_span_bytes(const DLTensor *t) {
  int64_t last = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] == 0) return 0;
    last += (t->shape[i] - 1) * tensor_stride(t, i);
  }
  return (last + 1) * static_cast<int64_t>(dl_dtype_bytes(t->dtype));
}

std::string shape_string(const DLTensor *t) {
  std::string s = "[";
  for (int i = 0; i < t->ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t->shape[i]);
  }
  return s + "]";
}

vattn_status_t check_tensor_generic(const DLTensor *t, const char *name) {
  if (!t) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDA &&
      t->device.device_type != kDLCUDAHost) {
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s': device type %d is not supported (CPU, CUDA or CUDAHost)", name,
                static_cast<int>(t->device.device_type));
  }
  if (t->ndim < 0 || t->ndim > 8)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': ndim %d is out of range", name, t->ndim);
  if (t->ndim > 0 && !t->shape)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape is NULL", name);
  if (t->dtype.lanes != 1 || t->dtype.bits == 0 || t->dtype.bits % 8 != 0)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype (code %d, %d bits, %d lanes) is not supported",
                name, t->dtype.code, t->dtype.bits, t->dtype.lanes);
  const int64_t kMax = std::numeric_limits<int64_t>::max() / 16;
  int64_t numel = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0)
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape[%d] = %lld is negative", name, i,
                  static_cast<long long>(t->shape[i]));
    if (t->shape[i] > 0 && numel > kMax / t->shape[i])
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape %s overflows", name,
                  shape_string(t).c_str());
    numel *= t->shape[i];
  }
  if (t->strides) {
    int64_t span = 0;
    for (int i = 0; i < t->ndim; ++i) {
      if (t->strides[i] < 0)
        return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': strides[%d] = %lld is negative", name,
                    i, static_cast<long long>(t->strides[i]));
      if (t->shape[i] > 1 && t->strides[i] > 0 && (t->shape[i] - 1) > (kMax - span) / t->strides[i])
        return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': strides overflow", name);
      if (t->shape[i] > 0) span += (t->shape[i] - 1) * t->strides[i];
    }
  }
  size_t esz = dl_dtype_bytes(t->dtype);
  if (t->byte_offset % esz != 0)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s': byte_offset %llu is not a multiple of the element size %zu", name,
                static_cast<unsigned long long>(t->byte_offset), esz);
  if (numel > 0 && !t->data)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': data is NULL", name);
  return VATTN_OK;
}

vattn_status_t check_tensor(const DLTensor *t, const char *name, const TensorReq &req) {
  if (!t && req.allow_null) return VATTN_OK;
  VATTN_TRY(check_tensor_generic(t, name));
  if (req.device_type >= 0 && t->device.device_type != req.device_type) {
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': is on device type %d, expected %d", name,
                static_cast<int>(t->device.device_type), req.device_type);
  }
  if (req.device_id >= 0 && t->device.device_id != req.device_id) {
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': is on device %d, expected device %d",
                name, t->device.device_id, req.device_id);
  }
  if (req.ndim >= 0 && t->ndim != req.ndim) {
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': has %d dims %s, expected %d", name,
                t->ndim, shape_string(t).c_str(), req.ndim);
  }
  if (req.shape && req.ndim >= 0) {
    for (int i = 0; i < req.ndim; ++i) {
      if (req.shape[i] >= 0 && t->shape[i] != req.shape[i]) {
        std::string want = "[";
        for (int j = 0; j < req.ndim; ++j) {
          if (j) want += ", ";
          want += req.shape[j] < 0 ? std::string("*") : std::to_string(req.shape[j]);
        }
        want += "]";
        return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape %s does not match %s", name,
                    shape_string(t).c_str(), want.c_str());
      }
    }
  }
  if (req.check_dtype && !dl_dtype_equal(t->dtype, req.dtype)) {
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype %s, expected %s", name,
                dl_dtype_name(t->dtype), dl_dtype_name(req.dtype));
  }
  if (req.require_contiguous && !tensor_is_contiguous(t)) {
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': must be contiguous (row-major)", name);
  }
  return VATTN_OK;
}

}  // namespace vattn
