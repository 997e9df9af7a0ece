// test_thread_pool.cpp -- core/thread_pool.h: every index runs exactly once,
// concurrent callers on one pool, nested use from the caller, exceptions.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace {

TEST(ThreadPool, EveryIndexOnceForManySizes) {
  for (int threads : {1, 2, 3, 0}) {
    vattn::ThreadPool pool(threads);
    EXPECT_GE(pool.size(), 1);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    }
  }
}

TEST(ThreadPool, ConcurrentCallersShareOnePool) {
  vattn::ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(6, 0);
  for (int c = 0; c < 6; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        std::atomic<int64_t> s{0};
        pool.parallel_for(257, [&](int64_t i) { s.fetch_add(i + c); });
        sums[static_cast<size_t>(c)] += s.load();
      }
    });
  for (auto &t : callers) t.join();
  for (int c = 0; c < 6; ++c) EXPECT_EQ(sums[static_cast<size_t>(c)], 50 * (256 * 257 / 2 + 257 * c));
}

TEST(ThreadPool, FirstExceptionReachesTheCallerAfterAllIndices) {
  vattn::ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(100,
                                 [&](int64_t i) {
                                   ran.fetch_add(1);
                                   if (i == 37) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 100);
  // The pool still works afterwards.
  std::atomic<int> again{0};
  pool.parallel_for(10, [&](int64_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 10);
}

}  // namespace
