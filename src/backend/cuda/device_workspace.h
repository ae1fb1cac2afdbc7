// DeviceWorkspace: one scratch buffer per device for the kernels that hand partial results to a second launch
// (attention_merge.cu's key splits, linear_split.cu's k chunks). Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

namespace tf::cuda {

class DeviceWorkspace {
 public:
  // zeroed: the buffer is zero when first handed out (cleared on the caller's stream).
  explicit DeviceWorkspace(int64_t capacity_floats, bool zeroed = false)
      : cap_(capacity_floats), zeroed_(zeroed) {}
  // The current device's buffer of capacity_floats floats when it holds `floats`: allocated at the first call
  // outside a stream capture and never moved (captured graphs keep its address). Null where `floats` is more
  // than the capacity, inside a capture before the first allocation, or when the device had no memory left
  // for it (the KV pool took it): the callers then run a form that needs none, with the same bits.
  float* get(cudaStream_t s, int64_t floats);

 private:
  static constexpr int kMaxDevices = 64;
  const int64_t cap_;
  const bool zeroed_;
  std::mutex mu_;
  float* ws_[kMaxDevices] = {};
  bool failed_[kMaxDevices] = {};
};

}  // namespace tf::cuda
