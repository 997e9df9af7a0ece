// thread_pool.cpp -- see thread_pool.h.
//
// Lifetime of a job: the caller pushes a pointer to its stack Job, works on
// it, then waits (under mu_) until every index is done and no worker is
// still inside it (`users`), and removes it from the queue before
// returning.  Workers only touch a job they found in the queue under mu_
// and registered in `users`, so they never see a dead job.
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

#if defined(__linux__)
#include <sched.h>
#endif

namespace vattn {

struct ThreadPool::Job {
  void *obj = nullptr;
  Call call = nullptr;
  int64_t n = 0;
  std::atomic<int64_t> next{0};  // next index to hand out
  std::atomic<int64_t> done{0};  // indices finished
  int users = 0;                 // workers inside run_indices (guarded by the pool's mu_)
  std::mutex err_mu;
  std::exception_ptr err;
};

namespace {

// Cores this process may run on: the affinity mask where the OS has one
// (taskset, cgroups cpusets), else the hardware count.
int usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads;
  if (n <= 0) n = usable_cores();
  if (n <= 0) n = 1;
  queue_.reserve(64);
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto &t : workers_) t.join();
}

const ThreadPool &ThreadPool::global() {
  // Leaked on purpose: worker threads must not be joined during static
  // destruction (the library may be unloaded in any order at exit).
  static const ThreadPool *pool = new ThreadPool(0);
  return *pool;
}

// Claims and runs indices until the job is exhausted.
void ThreadPool::run_indices(Job &job) {
  for (;;) {
    const int64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.n) return;
    try {
      job.call(job.obj, i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(job.err_mu);
      if (!job.err) job.err = std::current_exception();
    }
    job.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job *job = queue_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->n) {
      // Every index is claimed: later arrivals look at the next job.
      queue_.erase(queue_.begin());
      continue;
    }
    ++job->users;
    lk.unlock();
    run_indices(*job);
    lk.lock();
    if (--job->users == 0) done_cv_.notify_all();
  }
}

void ThreadPool::run(int64_t n, void *obj, Call call) const {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) call(obj, i);
    return;
  }
  Job job;
  job.obj = obj;
  job.call = call;
  job.n = n;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(&job);
  }
  work_cv_.notify_all();
  run_indices(job);
  {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] {
      return job.users == 0 && job.done.load(std::memory_order_acquire) == job.n;
    });
    auto it = std::find(queue_.begin(), queue_.end(), &job);
    if (it != queue_.end()) queue_.erase(it);
  }
  if (job.err) std::rethrow_exception(job.err);
}

}  // namespace vattn
