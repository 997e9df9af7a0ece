// thread_pool.cpp -- see thread_pool.h.
#include "core/thread_pool.h"

#include <atomic>
#include <exception>

#if defined(__linux__)
#include <sched.h>
#endif

namespace vattn {

struct ThreadPool::Job {
  const std::function<void(int64_t)> *fn = nullptr;
  int64_t n = 0;
  std::atomic<int64_t> next{0};  // next index to hand out
  std::atomic<int64_t> done{0};  // indices finished
  std::mutex mu;                 // guards err and the completion wait
  std::condition_variable cv;
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
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
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
    int64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.n) return;
    try {
      (*job.fn)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(job.mu);
      if (!job.err) job.err = std::current_exception();
    }
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.n) {
      std::lock_guard<std::mutex> lk(job.mu);
      job.cv.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = queue_.front();
      // Every index of this job is (about to be) claimed: later arrivals
      // should look at the next job.
      if (job->next.load(std::memory_order_relaxed) >= job->n) {
        queue_.pop_front();
        continue;
      }
    }
    run_indices(*job);
    std::lock_guard<std::mutex> lk(mu_);
    if (!queue_.empty() && queue_.front() == job) queue_.pop_front();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)> &fn) const {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(job);
  }
  cv_.notify_all();
  run_indices(*job);
  {
    std::unique_lock<std::mutex> lk(job->mu);
    job->cv.wait(lk, [&] { return job->done.load(std::memory_order_acquire) == job->n; });
  }
  {
    // Drop the job if no worker did (it may still sit in the queue).
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (*it == job) {
        queue_.erase(it);
        break;
      }
  }
  if (job->err) std::rethrow_exception(job->err);
}

}  // namespace vattn
