// thread_pool.h -- a small fork-join pool for the CPU backend.
//
// parallel_for(n, fn) runs fn(i) for every i in [0, n) on the pool's worker
// threads *and* the calling thread, and returns when all are done.  Indices
// are handed out dynamically (one atomic counter per call), so callers order
// expensive items first for load balance.  Several threads may call
// parallel_for on the same pool at once (a const layer / plan may be used
// concurrently): each call is its own job in a queue, and each caller also
// works on its own job, so no call waits on a busy pool forever.  fn must
// not throw; if it does, the first exception is rethrown to the caller after
// every index has run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace vattn {

class ThreadPool {
 public:
  // num_threads = total participants including the caller; 0 = the cores
  // this process may use (affinity mask); 1 = everything runs on the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t n, const std::function<void(int64_t)> &fn) const;

  // Process-wide pool (hardware concurrency) for operations without a plan.
  static const ThreadPool &global();

 private:
  struct Job;
  void worker_loop();
  static void run_indices(Job &job);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace vattn
