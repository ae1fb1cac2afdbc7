// Row-scan helpers of the one-block-per-logit-row kernels (argmax.cu, sample.cu): a latency-hiding pass
// over a row, and the exact "best entry" selection (larger value, then lower index).
#pragma once
#include <cstdint>

namespace tf::cuda {

// Calls f(i, in, l[i]) for every i of [0, V) owned by this thread, kThreads threads per block: 8 loads in
// flight per thread (one block's pass over a row is otherwise bound by memory latency), each warp over
// 256 consecutive ids per step, a thread's ids in ascending order, and a warp-uniform trip count (f may
// use warp collectives; lanes past V get in = false and a 0 value).
template <int kThreads, class F>
__device__ __forceinline__ void scan_row(const float* __restrict__ l, int64_t V, F f) {
  constexpr int U = 8;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t base = static_cast<int64_t>(warp) * 32 * U; base < V;
       base += static_cast<int64_t>(kThreads) * U) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * 32 + lane;
      v[u] = i < V ? __ldg(l + i) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = base + u * 32 + lane;
      f(i, i < V, v[u]);
    }
  }
}

struct Pick {
  float v;
  int32_t i;  // -1: none
};

// a ranks before b: larger value, then lower index; "none" ranks last. A total order, so the best of a
// set does not depend on the order it is visited in.
__device__ __forceinline__ bool before(const Pick& a, const Pick& b) {
  if (a.i < 0) return false;
  if (b.i < 0) return true;
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}

// Block-wide best of each thread's candidate; every thread gets it. warp_scratch: [blockDim / 32] shared,
// result: one shared Pick. Starts and ends with a barrier, so the scratch can be reused right after.
__device__ __forceinline__ Pick block_best(Pick p, Pick* warp_scratch, Pick* result) {
  for (int o = 16; o > 0; o >>= 1) {
    const Pick q{__shfl_xor_sync(0xffffffffu, p.v, o), __shfl_xor_sync(0xffffffffu, p.i, o)};
    if (before(q, p)) p = q;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) warp_scratch[threadIdx.x / 32] = p;
  __syncthreads();
  if (threadIdx.x == 0) {
    Pick b = warp_scratch[0];
    for (unsigned w = 1; w < blockDim.x / 32; ++w)
      if (before(warp_scratch[w], b)) b = warp_scratch[w];
    *result = b;
  }
  __syncthreads();
  const Pick r = *result;
  __syncthreads();
  return r;
}

}  // namespace tf::cuda
