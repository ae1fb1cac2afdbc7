#include "backend/cuda/device_workspace.h"

#include "backend/cuda/cuda_check.h"

namespace tf::cuda {

float* DeviceWorkspace::get(cudaStream_t s, int64_t floats) {
  if (floats > cap_) return nullptr;
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ws_[dev] && !failed_[dev]) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    TF_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusNone) return nullptr;  // no allocation inside a capture
    if (cudaMalloc(reinterpret_cast<void**>(&ws_[dev]), static_cast<size_t>(cap_) * sizeof(float)) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      ws_[dev] = nullptr;
      failed_[dev] = true;
    } else if (zeroed_) {
      TF_CUDA_CHECK(cudaMemsetAsync(ws_[dev], 0, static_cast<size_t>(cap_) * sizeof(float), s));
    }
  }
  return ws_[dev];
}

}  // namespace tf::cuda
