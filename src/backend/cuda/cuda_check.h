// Every CUDA runtime call is checked: a failure throws tf::DeviceError (backend/device_error.h) with the
// call, file, line and CUDA's message; its backend then refuses all work and its engine fails (503s).
#pragma once
#include <cuda_runtime_api.h>

namespace tf::cuda {
void check(cudaError_t e, const char* what, const char* file, int line);
}  // namespace tf::cuda

#define TF_CUDA_CHECK(x) ::tf::cuda::check((x), #x, __FILE__, __LINE__)
#define TF_CUDA_LAUNCHED() ::tf::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
