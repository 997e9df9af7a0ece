// Header section 1-2: versions, status codes, error messages, dtypes, devices.
#include <cstring>
#include <string>
#include <thread>

#include "test_util.h"

TEST(Core, VersionMatchesHeader) {
  EXPECT_EQ(vattn_version(), static_cast<uint32_t>(VATTN_VERSION_NUMBER));
  std::string v = std::to_string(VATTN_VERSION_MAJOR) + "." + std::to_string(VATTN_VERSION_MINOR) +
                  "." + std::to_string(VATTN_VERSION_PATCH);
  EXPECT_EQ(v, vattn_version_string());
}

TEST(Core, StatusCodesArePinned) {
  EXPECT_EQ(VATTN_OK, 0);
  EXPECT_EQ(VATTN_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(VATTN_ERR_UNSUPPORTED, 2);
  EXPECT_EQ(VATTN_ERR_OUT_OF_MEMORY, 3);
  EXPECT_EQ(VATTN_ERR_WORKSPACE_TOO_SMALL, 4);
  EXPECT_EQ(VATTN_ERR_CUDA, 5);
  EXPECT_EQ(VATTN_ERR_NOT_FOUND, 6);
  EXPECT_EQ(VATTN_ERR_INTERNAL, 7);
  EXPECT_EQ(VATTN_ERR_NO_DEVICE, 8);
}

TEST(Core, StatusStrings) {
  EXPECT_STREQ(vattn_status_string(VATTN_OK), "ok");
  EXPECT_STREQ(vattn_status_string(VATTN_ERR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(vattn_status_string(VATTN_ERR_CUDA), "CUDA error");
  EXPECT_STREQ(vattn_status_string(12345), "unknown status");
  EXPECT_STREQ(vattn_status_string(-1), "unknown status");
  for (int s = 0; s <= 8; ++s) EXPECT_NE(vattn_status_string(s), nullptr);
}

TEST(Core, ErrorMessageNamesArgumentAndClearsOnSuccess) {
  EXPECT_VATTN_ERR(vattn_cuda_device_count(nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_NE(std::string(vattn_last_error_message()).find("vattn_cuda_device_count"),
            std::string::npos);
  int32_t n = -1;
  EXPECT_VATTN_OK(vattn_cuda_device_count(&n));
  EXPECT_GE(n, 0);
  EXPECT_STREQ(vattn_last_error_message(), "");
}

TEST(Core, ErrorMessageIsThreadLocal) {
  EXPECT_EQ(vattn_cuda_device_count(nullptr), VATTN_ERR_INVALID_ARGUMENT);
  std::string other;
  std::thread th([&] { other = vattn_last_error_message(); });
  th.join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(vattn_last_error_message()), "");
  vattn_clear_last_error();
  EXPECT_STREQ(vattn_last_error_message(), "");
}

TEST(Core, DtypeSizes) {
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_FLOAT32), 4u);
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_FLOAT16), 2u);
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_BFLOAT16), 2u);
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_FP8_E4M3), 1u);
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_FP8_E5M2), 1u);
  EXPECT_EQ(vattn_dtype_size(VATTN_DTYPE_UINT8), 1u);
  EXPECT_EQ(vattn_dtype_size(0), 0u);
  EXPECT_EQ(vattn_dtype_size(99), 0u);
}
