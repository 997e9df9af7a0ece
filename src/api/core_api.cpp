// core_api.cpp -- C entry points of header section 1-2: versions, status
// strings, the error message, dtype sizes, device count.
#include "core/cuda_runtime.h"
#include "core/error.h"

extern "C" {

VATTN_API uint32_t vattn_version(void) { return VATTN_VERSION_NUMBER; }

#define VATTN_STR2(x) #x
#define VATTN_STR(x) VATTN_STR2(x)
VATTN_API const char *vattn_version_string(void) {
  return VATTN_STR(VATTN_VERSION_MAJOR) "." VATTN_STR(VATTN_VERSION_MINOR) "." VATTN_STR(
      VATTN_VERSION_PATCH);
}

VATTN_API const char *vattn_status_string(vattn_status_t status) {
  switch (status) {
    case VATTN_OK: return "ok";
    case VATTN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case VATTN_ERR_UNSUPPORTED: return "unsupported";
    case VATTN_ERR_OUT_OF_MEMORY: return "out of memory";
    case VATTN_ERR_WORKSPACE_TOO_SMALL: return "workspace or buffer too small";
    case VATTN_ERR_CUDA: return "CUDA error";
    case VATTN_ERR_NOT_FOUND: return "not found";
    case VATTN_ERR_INTERNAL: return "internal error";
    case VATTN_ERR_NO_DEVICE: return "no CUDA device";
    default: return "unknown status";
  }
}

VATTN_API const char *vattn_last_error_message(void) { return vattn::last_error(); }

VATTN_API void vattn_clear_last_error(void) { vattn::clear_error(); }

VATTN_API size_t vattn_dtype_size(int32_t dtype) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: return 4;
    case VATTN_DTYPE_FLOAT16:
    case VATTN_DTYPE_BFLOAT16: return 2;
    case VATTN_DTYPE_FP8_E4M3:
    case VATTN_DTYPE_FP8_E5M2:
    case VATTN_DTYPE_UINT8: return 1;
    default: return 0;
  }
}

VATTN_API vattn_status_t vattn_cuda_device_count(int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = vattn::cuda_device_count();
    return VATTN_OK;
  });
}

}  // extern "C"
