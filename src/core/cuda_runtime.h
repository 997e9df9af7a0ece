// cuda_runtime.h -- the few CUDA runtime facts host code needs, callable in
// every build (a CPU-only build reports zero devices).
#pragma once

#include <cstdint>

#include "vattn.h"

namespace vattn {

// Number of usable CUDA devices; 0 when built without CUDA or when no
// driver / GPU is present.
int32_t cuda_device_count() noexcept;

// True when this library was compiled with CUDA kernels.
bool built_with_cuda() noexcept;

// Checks that device `id` exists; otherwise VATTN_ERR_NO_DEVICE + message.
vattn_status_t cuda_require_device(int32_t id, const char *what);

}  // namespace vattn
