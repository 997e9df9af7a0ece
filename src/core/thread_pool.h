// thread_pool.h -- a small fork-join pool for the CPU backend.
//
// parallel_for(n, fn) runs fn(i) for every i in [0, n) on the pool's worker
// threads *and* the calling thread, and returns when all are done.  Indices
// are handed out dynamically (one atomic counter per call), so callers order
// expensive items first for load balance.  Several threads may call
// parallel_for on the same pool at once (a const layer / plan may be used
// concurrently): each call is its own job in a queue, and each caller also
// works on its own job, so no call waits on a busy pool forever.
//
// No heap allocation per call (the job lives on the caller's stack and fn is
// passed by reference), so a forward pass allocates nothing once warm.  fn
// should not throw; if it does, the first exception is rethrown to the
// caller after every index has run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
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

  template <class F>
  void parallel_for(int64_t n, F &&fn) const {
    using Fn = std::remove_reference_t<F>;
    run(n, const_cast<void *>(static_cast<const void *>(&fn)),
        [](void *obj, int64_t i) { (*static_cast<Fn *>(obj))(i); });
  }

  // Process-wide pool (all usable cores) for operations without a plan.
  static const ThreadPool &global();

 private:
  struct Job;
  using Call = void (*)(void *, int64_t);
  void run(int64_t n, void *obj, Call call) const;
  void worker_loop();
  static void run_indices(Job &job);

  mutable std::mutex mu_;
  mutable std::condition_variable work_cv_;  // workers: a job arrived / stop
  mutable std::condition_variable done_cv_;  // callers: a worker left a job
  mutable std::vector<Job *> queue_;         // oldest first; jobs live on callers' stacks
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace vattn
