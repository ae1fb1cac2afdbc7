// Shared by the CUDA kernel benches (bench/linear, bench/attention): device buffers and deterministic bf16
// inputs. Plain C++ over the CUDA runtime API.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace tf::bench {

inline void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  TF_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

// n deterministic bf16 values into `dev`, never NaN or Inf: random sign and 7-bit mantissa, biased exponent
// ex_base + (a random value & ex_mask) (115 + 0..7: magnitudes 2^-12 .. 2^-4, like a trained layer's weights;
// 124 + 0..3: ±[2^-3, 2), like attention inputs).
inline void fill_bf16(void* dev, int64_t n, uint32_t seed, uint32_t ex_base, uint32_t ex_mask) {
  std::vector<uint16_t> h(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& v : h) {
    s = s * 1664525u + 1013904223u;
    const uint32_t mant = (s >> 9) & 0x7f, sign = (s >> 31) << 15, ex = ex_base + ((s >> 16) & ex_mask);
    v = static_cast<uint16_t>(sign | (ex << 7) | mant);
  }
  TF_CUDA_CHECK(cudaMemcpy(dev, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
}

// Milliseconds of GPU time for what `work` queues on stream s (events recorded before and after it).
template <class F>
float stream_ms(cudaStream_t s, F work) {
  cudaEvent_t e0, e1;
  TF_CUDA_CHECK(cudaEventCreate(&e0));
  TF_CUDA_CHECK(cudaEventCreate(&e1));
  TF_CUDA_CHECK(cudaEventRecord(e0, s));
  work();
  TF_CUDA_CHECK(cudaEventRecord(e1, s));
  TF_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  TF_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  TF_CUDA_CHECK(cudaEventDestroy(e0));
  TF_CUDA_CHECK(cudaEventDestroy(e1));
  return ms;
}

// The device-to-device copy bandwidth, bytes read + written per second (1 GiB copied 10 times after 2 warm-up
// copies; bench/serve/serve_report.py measures it the same way through torch): the bound the benches print
// beside their figures (4.3e12 on the H200, 3.0e12 on the H100 so measured).
inline double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void* a = dev_alloc(bytes);
  void* b = dev_alloc(bytes);
  TF_CUDA_CHECK(cudaMemset(a, 1, bytes));
  for (int i = 0; i < 2; ++i) TF_CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  const float ms = stream_ms(nullptr, [&] {
    for (int i = 0; i < 10; ++i) TF_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  });
  TF_CUDA_CHECK(cudaFree(a));
  TF_CUDA_CHECK(cudaFree(b));
  return 2.0 * 10.0 * static_cast<double>(bytes) / (static_cast<double>(ms) * 1e-3);
}

// Captures what `launch` queues on stream s into a graph, replays it once to warm up, then times one replay:
// milliseconds.
template <class F>
float graph_replay_ms(cudaStream_t s, F launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  TF_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  launch();
  TF_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  TF_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  TF_CUDA_CHECK(cudaGraphLaunch(ge, s));  // warm-up replay
  const float ms = stream_ms(s, [&] { TF_CUDA_CHECK(cudaGraphLaunch(ge, s)); });
  TF_CUDA_CHECK(cudaGraphExecDestroy(ge));
  TF_CUDA_CHECK(cudaGraphDestroy(g));
  return ms;
}

}  // namespace tf::bench
