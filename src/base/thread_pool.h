// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into
// contiguous ranges; the split never changes what a row computes (each index is computed by
// exactly one thread with the same code), so results do not depend on the thread count.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tf {
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int size() const { return n_threads_; }
  // fn(begin, end) over disjoint ranges covering [0, n); blocks until all are done. Callers on
  // different threads take turns (one job at a time); fn must not call parallel_for itself.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Process-wide pool sized by TF_THREADS or hardware_concurrency().
ThreadPool& global_pool();
}  // namespace tf
