// A device failure and how a backend behaves after one. Plain C++ (no CUDA): the runtime catches it.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tf {

// A CUDA error (a lost or faulted device, an illegal address that poisons the context, memory exhausted
// inside a step), thrown by the backend call that hit it. The backend's device state is then unknown, so
// the backend throws it again from every later call but free_memory (which never throws). The engine
// that owns the backend catches it at step level, answers its requests 503 and takes no more work
// (runtime/engine.h); nothing else catches it. An exception rather than a Status: ops return nothing,
// and no caller of an op could go on with its result.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The sticky failure state a backend keeps (the CPU and the CUDA backend hold one each). Thread-safe.
class DeviceFailure {
 public:
  // At the start of each backend call: throws DeviceError once failed, and counts down a fault armed by
  // arm() (`counted`: compute ops and transfers, not allocations).
  void begin_call(std::string_view backend, bool counted = true) {
    if (failed()) throw DeviceError(message());
    if (counted && fault_in_.load(std::memory_order_relaxed) > 0 && fault_in_.fetch_sub(1) == 1) {
      record(std::string(backend) + ": injected device fault (test_hooks::fail_backend_op)");
      throw DeviceError(message());
    }
  }
  // The first failure is the one reported.
  void record(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    message_ = what;
    failed_.store(true, std::memory_order_release);
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string message() const {
    std::lock_guard<std::mutex> lock(mu_);
    return message_;
  }
  // test_hooks::fail_backend_op: the n-th counted call from now fails (0: disarm).
  void arm(int64_t n) { fault_in_.store(n > 0 ? n : 0); }

 private:
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> fault_in_{0};  // > 0: the counted call that brings it to 0 fails
  mutable std::mutex mu_;
  std::string message_;
};

}  // namespace tf
