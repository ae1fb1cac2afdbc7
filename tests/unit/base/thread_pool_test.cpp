// ThreadPool hand-off (spin, then block): every index of [0, n) is run exactly once per call, calls
// from several threads take turns, and the pool shuts down cleanly whether its workers spin or sleep.
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace tf;

namespace {

// n calls of parallel_for over sizes 1..97; each index's counter must end at its number of calls.
void check_coverage(ThreadPool& pool, int calls) {
  std::vector<std::atomic<int>> hits(97);
  std::vector<int> want(97, 0);
  for (int c = 0; c < calls; ++c) {
    const int64_t n = 1 + c % 97;
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      ASSERT_LE(0, b);
      ASSERT_LT(b, e);
      ASSERT_LE(e, n);
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    });
    for (int64_t i = 0; i < n; ++i) ++want[static_cast<size_t>(i)];
  }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].load(), want[i]) << "index " << i;
}

}  // namespace

TEST(ThreadPool, EveryIndexOnceSpinningSleepingAndSingleThreaded) {
  for (int threads : {1, 2, 3, 5}) {
    for (int spin : {0, 50, 200}) {
      ThreadPool pool(threads, spin);
      EXPECT_EQ(pool.size(), threads);
      EXPECT_EQ(pool.spin_us(), spin);
      check_coverage(pool, 3000);
    }
  }
}

TEST(ThreadPool, WorkersThatFellAsleepWakeUp) {
  ThreadPool pool(3, 20);
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past the spin: the workers block
    check_coverage(pool, 50);
  }
}

TEST(ThreadPool, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(3, 100);
  std::atomic<int> inside{0}, overlap{0};
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int c = 0; c < 2000; ++c)
      pool.parallel_for(64, [&](int64_t b, int64_t e) {
        if (b == 0 && inside.fetch_add(1) != 0) overlap.fetch_add(1);
        total.fetch_add(e - b);
        if (b == 0) inside.fetch_sub(1);
      });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 2000 * 64);
  EXPECT_EQ(overlap.load(), 0) << "two jobs ran at once";
}

TEST(ThreadPool, SpinFromEnvironmentIsBoundedAndZeroMeansBlock) {
  ThreadPool blocking(2, 0);
  EXPECT_EQ(blocking.spin_us(), 0);
  check_coverage(blocking, 500);
  ThreadPool def(2);
  EXPECT_GE(def.spin_us(), 0);
  EXPECT_LE(def.spin_us(), 100000);
}
