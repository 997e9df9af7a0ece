// test_gpu_slot_mapping.cpp -- vattn_slot_mapping_compute_tensors (header
// section 6).  CPU tensors (runs everywhere, no GPU needed): equal to
// vattn_slot_mapping_compute on random batches, same errors.  CUDA tensors:
// against the host function on random batches (padded block-table rows,
// pad tail), and -1 (not an error) for the tokens the host rejects.
#include <algorithm>
#include <numeric>
#include <random>

#include "gpu_harness.h"

namespace {

struct Batch {
  int64_t rows = 0, cols = 0, stride = 0, num_reqs = 0, T = 0, len = 0, nblocks = 0;
  int32_t bs = 16;
  vt::HostTensor bt, qsl, pos, out;
};

// Random batch; the block table has `stride` >= cols columns of storage
// (a strided view of `cols` valid columns).  Every token valid.
Batch make_batch(std::mt19937_64 &g) {
  Batch b;
  std::uniform_int_distribution<int> U(0, 1 << 20);
  const int32_t sizes[] = {1, 8, 16, 32};
  b.bs = sizes[U(g) % 4];
  b.num_reqs = U(g) % 9;
  b.rows = b.num_reqs + U(g) % 3;
  b.cols = 1 + U(g) % 12;
  b.stride = b.cols + U(g) % 3;
  b.nblocks = b.rows * b.cols + 5;
  std::vector<int32_t> qsl(b.num_reqs + 1, 0);
  for (int64_t r = 0; r < b.num_reqs; ++r) qsl[r + 1] = qsl[r] + U(g) % 7;
  b.T = qsl[b.num_reqs];
  b.len = b.T + U(g) % 4;
  b.bt = vt::HostTensor({b.rows, b.cols}, vt::dl_i32(), {b.stride, 1});
  std::vector<int32_t> ids(static_cast<size_t>(b.nblocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), g);
  int32_t *btp = b.bt.as<int32_t>();
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t c = 0; c < b.cols; ++c) btp[r * b.stride + c] = ids[(r * b.cols + c) % b.nblocks];
  b.qsl = vt::HostTensor({b.num_reqs + 1}, vt::dl_i32());
  std::copy(qsl.begin(), qsl.end(), b.qsl.as<int32_t>());
  b.pos = vt::HostTensor({b.T}, vt::dl_i64());
  for (int64_t r = 0; r < b.num_reqs; ++r)
    for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t)
      b.pos.as<int64_t>()[t] = U(g) % (b.cols * b.bs);
  b.out = vt::HostTensor({b.len}, vt::dl_i64());
  std::fill(b.out.as<int64_t>(), b.out.as<int64_t>() + b.len, int64_t{12345});
  return b;
}

std::vector<int64_t> host_reference(Batch &b, vattn_status_t *st) {
  vattn_slot_mapping_args_t a;
  vattn_slot_mapping_args_init(&a);
  std::vector<int32_t> valid(static_cast<size_t>(std::max<int64_t>(b.rows, 1)),
                             static_cast<int32_t>(b.cols));
  a.block_table = b.bt.as<int32_t>();
  a.num_rows = b.rows;
  a.row_stride = b.stride;
  a.num_blocks_per_row = valid.data();
  a.query_start_loc = b.qsl.as<int32_t>();
  a.num_reqs = b.num_reqs;
  a.positions = b.pos.as<int64_t>();
  a.num_tokens = b.T;
  a.block_size = b.bs;
  a.num_cache_blocks = b.nblocks;
  std::vector<int64_t> out(static_cast<size_t>(b.len), 777);
  *st = vattn_slot_mapping_compute(&a, out.data(), b.len);
  return out;
}

std::vector<int64_t> values(vt::HostTensor &t, int64_t n) {
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + n);
}

}  // namespace

TEST(GpuSlotMapping, CpuTensorsMatchHostFunction) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 200; ++it) {
    Batch b = make_batch(g);
    vattn_status_t st = VATTN_OK;
    const std::vector<int64_t> want = host_reference(b, &st);
    ASSERT_VATTN_OK(st);
    ASSERT_VATTN_OK(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.pos.t, &b.out.t, b.bs,
                                                       b.nblocks, nullptr));
    ASSERT_EQ(values(b.out, b.len), want) << "iteration " << it;
  }
}

TEST(GpuSlotMapping, CpuTensorsReportErrors) {
  std::mt19937_64 g(vt::test_seed());
  Batch b;
  do b = make_batch(g);
  while (b.T == 0);
  // Block index past the row: an error, nothing written.
  b.pos.as<int64_t>()[0] = b.cols * b.bs;
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.pos.t, &b.out.t, b.bs,
                                                      b.nblocks, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "valid entries");
  EXPECT_EQ(b.out.as<int64_t>()[0], 12345);
  b.pos.as<int64_t>()[0] = 0;
  // Block id outside the cache.
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t c = 0; c < b.cols; ++c) b.bt.as<int32_t>()[r * b.stride + c] = 5;
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.pos.t, &b.out.t, b.bs,
                                                      1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "outside the cache");
  // Shape / dtype errors.
  vt::HostTensor small({b.T > 0 ? b.T - 1 : 0}, vt::dl_i64());
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.pos.t, &small.t, b.bs,
                                                      b.nblocks, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "slot_mapping");
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.bt.t, &b.out.t, b.bs,
                                                      b.nblocks, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "positions");
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(&b.bt.t, &b.qsl.t, &b.pos.t, &b.out.t, 0,
                                                      b.nblocks, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "block_size");
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(nullptr, &b.qsl.t, &b.pos.t, &b.out.t, b.bs,
                                                      b.nblocks, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "block_table");
}

TEST(GpuSlotMapping, CudaTensorsMatchHostFunction) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 100; ++it) {
    Batch b = make_batch(g);
    vattn_status_t st = VATTN_OK;
    std::vector<int64_t> want = host_reference(b, &st);
    ASSERT_VATTN_OK(st);
    // Some tokens the host would reject: on the device they read -1.
    const bool bad = b.T > 0 && it % 2 == 1;
    int64_t bad_tok = -1, bad_tok2 = -1;
    if (bad) {
      bad_tok = it % b.T;
      b.pos.as<int64_t>()[bad_tok] = b.cols * b.bs + 3;  // past the row
      want[bad_tok] = -1;
      bad_tok2 = (bad_tok + 1) % b.T;
      if (bad_tok2 != bad_tok) {
        b.pos.as<int64_t>()[bad_tok2] = -5;  // negative position
        want[bad_tok2] = -1;
      }
    }
    gt::DevTensor bt(b.bt), qsl(b.qsl), pos(b.pos), out(b.out);
    ASSERT_NE(out.ptr, 0u);
    ASSERT_VATTN_OK(vattn_slot_mapping_compute_tensors(bt.dl(), qsl.dl(), pos.dl(), out.dl(), b.bs,
                                                       b.nblocks, nullptr));
    vt::HostTensor got({b.len}, vt::dl_i64());
    out.download(&got);
    ASSERT_EQ(values(got, b.len), want) << "iteration " << it;
  }
}

TEST(GpuSlotMapping, CudaIdsOutsideCacheGiveMinusOne) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  Batch b;
  do b = make_batch(g);
  while (b.T == 0);
  vattn_status_t st = VATTN_OK;
  std::vector<int64_t> want = host_reference(b, &st);
  ASSERT_VATTN_OK(st);
  // num_cache_blocks = 1: only tokens in block id 0 keep their slot.
  for (int64_t i = 0; i < b.T; ++i)
    if (want[i] >= b.bs) want[i] = -1;
  gt::DevTensor bt(b.bt), qsl(b.qsl), pos(b.pos), out(b.out);
  ASSERT_VATTN_OK(vattn_slot_mapping_compute_tensors(bt.dl(), qsl.dl(), pos.dl(), out.dl(), b.bs, 1,
                                                     nullptr));
  vt::HostTensor got({b.len}, vt::dl_i64());
  out.download(&got);
  EXPECT_EQ(values(got, b.len), want);
  // Mixed devices are refused.
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute_tensors(bt.dl(), &b.qsl.t, pos.dl(), out.dl(), b.bs,
                                                      1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "one device");
}
