// A grid-stride elementwise launch shared by the one-line ops (act_mul, act, add, sigmoid_mul,
// cast, ...): f(i) is called once per element index in [0, n). Launched for programmatic dependent launch
// (pdl.cuh): every thread waits for the previous kernel before its first element.
#pragma once
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda {

template <class F>
__global__ void elementwise_kernel(int64_t n, F f) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void launch_elementwise(cudaStream_t s, int64_t n, F f) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  launch_pdl(s, dim3(blocks), dim3(kThreads), 0, elementwise_kernel<F>, n, f);
}

}  // namespace tf::cuda
