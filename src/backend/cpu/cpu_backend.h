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

class DeviceFailure;
// The failure state of a CPU backend (null for another backend): test_hooks::fail_backend_op.
DeviceFailure* cpu_device_failure(Backend& b);

// How the CPU ops evaluate exp, erf, tanh, cos, sin and log1p (backend/cpu/fmath.h): glibc's float
// functions (the default), or in double rounded once, as the CUDA kernels do (the contract tests).
// Process-wide; set it before any op runs.
enum class CpuTranscendentals { kLibm, kDouble };
void set_cpu_transcendentals(CpuTranscendentals mode);
}  // namespace tf
