#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TF_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TF_CPU_RELAX() asm volatile("yield")
#else
#define TF_CPU_RELAX() ((void)0)
#endif

namespace tf {
namespace {

int default_spin_us() {
  if (const char* s = std::getenv("TF_SPIN_US")) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end != s && v >= 0) return static_cast<int>(std::min(v, 100000L));
  }
  return 200;
}

// Spins until done() or spin_us have passed; true when done() was seen. Between short bursts of
// pause it yields the core, so that with more runnable threads than cores (parallel test runs,
// other processes) the thread that has the work gets the CPU instead of the spinner.
template <typename F>
bool spin_until(F done, int spin_us) {
  if (spin_us <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      TF_CPU_RELAX();
    }
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

void run_slice(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int index, int parts) {
  const int64_t begin = n * index / parts, end = n * (index + 1) / parts;
  if (begin < end) fn(begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, int spin_us)
    : n_threads_(std::max(1, n_threads)), spin_us_(spin_us < 0 ? default_spin_us() : spin_us) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready, spin_us_)) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_slice(*job_, job_n_, index, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // The caller may be asleep on cv_done_ (it checks pending_ under mu_ before it waits).
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  job_ = &fn;
  job_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under mu_ so that a worker checking its wait predicate cannot miss the new generation.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_work_.notify_all();
  run_slice(fn, n, 0, n_threads_);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done, spin_us_)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, done);
  }
}

ThreadPool& global_pool() {
  static ThreadPool pool([] {
    if (const char* s = std::getenv("TF_THREADS")) {
      int v = std::atoi(s);
      if (v > 0) return v;
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }());
  return pool;
}
}  // namespace tf
