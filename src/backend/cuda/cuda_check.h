// Every CUDA runtime call is checked: a failure aborts with the file, line and CUDA's message (a
// failed launch or copy is a programming error or a lost device, neither recoverable inside a step).
#pragma once
#include <cuda_runtime_api.h>

namespace tf::cuda {
void check(cudaError_t e, const char* what, const char* file, int line);
}  // namespace tf::cuda

#define TF_CUDA_CHECK(x) ::tf::cuda::check((x), #x, __FILE__, __LINE__)
#define TF_CUDA_LAUNCHED() ::tf::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
