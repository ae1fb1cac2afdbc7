// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into
// contiguous ranges; the split never changes what a row computes (each index is computed by
// exactly one thread with the same code), so results do not depend on the thread count.
//
// Hand-off: a decode step issues dozens of small parallel_for calls, so waking sleeping workers
// through a condition variable for each (tens of microseconds on a VM) would cost more than the
// work. Workers and the caller therefore spin on atomics for a bounded time (TF_SPIN_US, default
// 200 us; 0 = always block) before they block on the condition variables.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tf {
class ThreadPool {
 public:
  // spin_us < 0: TF_SPIN_US or the default.
  explicit ThreadPool(int n_threads, int spin_us = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return n_threads_; }
  int spin_us() const { return spin_us_; }
  // fn(begin, end) over disjoint ranges covering [0, n); blocks until all are done. Callers on
  // different threads take turns (one job at a time); fn must not call parallel_for itself.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  int n_threads_;
  int spin_us_;
  std::vector<std::thread> threads_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;       // guards the sleeping side of the hand-off
  std::condition_variable cv_work_, cv_done_;
  // Written by the caller before generation_ is bumped (release), read by workers after they see
  // the new generation (acquire); rewritten only after every worker has finished (pending_ == 0).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// Process-wide pool sized by TF_THREADS or hardware_concurrency().
ThreadPool& global_pool();
}  // namespace tf
