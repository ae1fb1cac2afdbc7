// The CPU reference backend: plain loops, f32 accumulation in a fixed order, rows spread over a
// thread pool. Model code never includes this header (it gets a Backend& from create_backend).
#pragma once
#include <memory>

#include "backend/ops.h"
#include "base/thread_pool.h"

namespace tf {
// pool: the threads ops run on; null = global_pool(). Tests pass their own pools to check that
// results do not depend on the thread count.
std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool = nullptr);
}  // namespace tf
