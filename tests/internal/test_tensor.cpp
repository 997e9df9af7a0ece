// src/core/tensor: DLTensor validation rules.
#include "core/tensor.h"

#include "test_util.h"

using vattn::check_tensor;
using vattn::TensorReq;

TEST(Tensor, AcceptsCompactAndStrided) {
  vt::HostTensor a({2, 3, 4}, vt::dl_f32());
  EXPECT_VATTN_OK(vattn::check_tensor_generic(a.dl(), "a"));
  vt::HostTensor b({2, 3}, vt::dl_f16(), {1, 2});
  EXPECT_VATTN_OK(vattn::check_tensor_generic(b.dl(), "b"));
  EXPECT_FALSE(vattn::tensor_is_contiguous(b.dl()));
  EXPECT_EQ(vattn::tensor_stride(a.dl(), 0), 12);
  EXPECT_EQ(vattn::tensor_span_bytes(a.dl()), 24 * 4);
}

TEST(Tensor, RejectsBadFields) {
  vt::HostTensor a({2, 3}, vt::dl_f32());
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(nullptr, "q"), VATTN_ERR_INVALID_ARGUMENT, "'q'");
  a.t.shape[0] = -1;
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(a.dl(), "q"), VATTN_ERR_INVALID_ARGUMENT, "negative");
  a.t.shape[0] = 2;
  a.t.byte_offset = 2;
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(a.dl(), "q"), VATTN_ERR_INVALID_ARGUMENT, "byte_offset");
  a.t.byte_offset = 0;
  void *d = a.t.data;
  a.t.data = nullptr;
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(a.dl(), "q"), VATTN_ERR_INVALID_ARGUMENT, "data");
  a.t.data = d;
  a.t.device.device_type = kDLVulkan;
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(a.dl(), "q"), VATTN_ERR_INVALID_ARGUMENT, "device");
  a.t.device.device_type = kDLCPU;
  int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  a.t.shape = huge;
  EXPECT_VATTN_ERR(vattn::check_tensor_generic(a.dl(), "q"), VATTN_ERR_INVALID_ARGUMENT, "overflow");
}

TEST(Tensor, RequirementShapeDtypeDevice) {
  vt::HostTensor a({5, 8, 64}, vt::dl_bf16());
  int64_t want[3] = {-1, 8, 64};
  TensorReq r;
  r.ndim = 3;
  r.shape = want;
  r.check_dtype = true;
  r.dtype = vt::dl_bf16();
  r.device_type = kDLCPU;
  EXPECT_VATTN_OK(check_tensor(a.dl(), "q", r));
  want[2] = 128;
  EXPECT_VATTN_ERR(check_tensor(a.dl(), "q", r), VATTN_ERR_INVALID_ARGUMENT, "[*, 8, 128]");
  want[2] = 64;
  r.dtype = vt::dl_f16();
  EXPECT_VATTN_ERR(check_tensor(a.dl(), "q", r), VATTN_ERR_INVALID_ARGUMENT, "float16");
  r.dtype = vt::dl_bf16();
  r.device_type = kDLCUDA;
  EXPECT_VATTN_ERR(check_tensor(a.dl(), "q", r), VATTN_ERR_INVALID_ARGUMENT, "device");
}
