// OncePerDevice: per-device one-time setup of the CUDA kernels (their function attributes); sm_count: the
// current device's multiprocessor count, looked up once per device.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace tf::cuda {

// Runs f(device) once per device for the calling thread's current device: a kernel's function attributes
// (cudaFuncSetAttribute, e.g. its dynamic shared memory limit) belong to one device's context, and
// serve --devices runs one backend per GPU in one process. A static per kernel; two threads racing on
// one device both run f, which only repeats an idempotent setting.
class OncePerDevice {
 public:
  template <class F>
  void run(F f) {
    int dev = 0;
    TF_CUDA_CHECK(cudaGetDevice(&dev));
    const uint64_t bit = uint64_t{1} << (dev & 63);
    if (done_.load(std::memory_order_acquire) & bit) return;
    f(dev);
    done_.fetch_or(bit, std::memory_order_acq_rel);
  }

 private:
  std::atomic<uint64_t> done_{0};
};

// The calling thread's current device's multiprocessor count (launch shapes that fill the SMs once), read
// once per device (serve --devices runs one backend per GPU in one process).
inline int sm_count() {
  static std::atomic<int> counts[64] = {};
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  std::atomic<int>& c = counts[dev & 63];
  int n = c.load(std::memory_order_acquire);
  if (n == 0) {
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    c.store(n, std::memory_order_release);
  }
  return n;
}

}  // namespace tf::cuda
