// Shared device helpers for the CUDA ops. The kernels that reproduce the CPU reference's arithmetic
// (all but the tensor-core ones and the optional per-token gated delta rule, which are held to it by
// a tolerance and write their fmaf explicitly) follow backend/cpu/common.h: f32 math compiled with
// -fmad=false (no a*b+c contraction), IEEE division and sqrt, the same 8-lane summation order for every dot
// product, and RNE bf16 rounding with the same NaN rule. Transcendentals are evaluated in double and rounded
// once to f32, which equals glibc's float functions except where those are not correctly rounded (rare; see
// the contract test).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/ops.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace tf::cuda {

inline bool is_float_act(DType t) { return t == DType::F32 || t == DType::BF16; }
inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Storage types: bf16 tensors are uint16_t bit patterns, f32 tensors floats.
using bf16_t = uint16_t;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__device__ __forceinline__ bf16_t f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_t>(u >> 16);
}

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16_t from_f<bf16_t>(float v) {
  return f2bf(v);
}

// rnd(): the value rounded to the activation dtype T and back (identity for f32).
template <class T>
__device__ __forceinline__ float rnd(float v) {
  return to_f(from_f<T>(v));
}

// expf/erff/tanhf/cosf/sinf/log1pf of the CPU reference, as double-precision evaluations rounded once.
__device__ __forceinline__ float exp_f(float x) { return static_cast<float>(exp(static_cast<double>(x))); }
__device__ __forceinline__ float erf_f(float x) { return static_cast<float>(erf(static_cast<double>(x))); }
__device__ __forceinline__ float tanh_f(float x) { return static_cast<float>(tanh(static_cast<double>(x))); }
__device__ __forceinline__ float cos_f(float x) { return static_cast<float>(cos(static_cast<double>(x))); }
__device__ __forceinline__ float sin_f(float x) { return static_cast<float>(sin(static_cast<double>(x))); }
__device__ __forceinline__ float log1p_f(float x) {
  return static_cast<float>(log1p(static_cast<double>(x)));
}

__device__ __forceinline__ float combine8(const float* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// dot_f32 of the CPU reference, by one thread: lane k % 8 accumulates in increasing k.
template <class A, class B>
__device__ __forceinline__ float dot8(const A* a, const B* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n; ++k) acc[k & 7] += to_f(a[k]) * to_f(b[k]);
  return combine8(acc);
}

// The same sum Σ_k f(k) over k in [0, n), computed by a whole block: threads 0..7 each run one lane,
// then the lanes combine in the fixed tree. Every thread of the block must call it; all get the sum.
template <class F>
__device__ float block_sum8(int64_t n, F f) {
  __shared__ float lanes[8];
  __syncthreads();  // lanes may still be read by a previous call
  if (threadIdx.x < 8) {
    float a = 0.0f;
    for (int64_t k = threadIdx.x; k < n; k += 8) a += f(k);
    lanes[threadIdx.x] = a;
  }
  __syncthreads();
  return combine8(lanes);
}

// rms_norm's Σ_k f(k)² over [0, d) in the CPU's order (backend/cpu/common.h dot_f32), by the whole block;
// f(k) reads shared memory. Threads 0..7 are the lanes; once per block (its lanes are not re-synchronised).
template <class F>
__device__ float block_sum_sq8(int64_t d, F f) {
  __shared__ float lanes[8];
  if (threadIdx.x < 8) {
    float a = 0.0f;
    int64_t k = threadIdx.x;
    for (; k + 56 < d; k += 64) {  // the next 8 terms of this lane: loads first, adds in order
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = f(k + 8 * u);
#pragma unroll
      for (int u = 0; u < 8; ++u) a += v[u] * v[u];
    }
    for (; k < d; k += 8) {
      const float v = f(k);
      a += v * v;
    }
    lanes[threadIdx.x] = a;
  }
  __syncthreads();
  return combine8(lanes);
}

// Dispatch on an activation dtype: runs the block with T = float or bf16_t (nested for ops with several
// dtypes). A macro rather than a generic lambda: nvcc allows no __device__ lambda inside one.
#define TF_DISPATCH_ACT(dt, T, ...)         \
  do {                                      \
    TF_CHECK(::tf::cuda::is_float_act(dt)); \
    if ((dt) == ::tf::DType::BF16) {        \
      using T = ::tf::cuda::bf16_t;         \
      __VA_ARGS__                           \
    } else {                                \
      using T = float;                      \
      __VA_ARGS__                           \
    }                                       \
  } while (0)

template <class T>
inline T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data);
}

}  // namespace tf::cuda
