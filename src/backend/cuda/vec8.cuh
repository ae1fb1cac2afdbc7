// Eight consecutive activation elements as f32 (bf16: one 16-byte access; f32: two), and the warp-wide
// 8-lane sum of squares, for the row kernels' fast forms (rms_norm.cu, qkv_prep.cu, act.cu, add.cu). The
// callers check on the host that every row they touch this way starts 16-byte aligned (aligned16).
#pragma once
#include <cstdint>
#include <type_traits>

#include "backend/cuda/common.cuh"

namespace tf::cuda {

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Calls of at least this many rows take the row kernels' warp / 8-wide / plain forms; fewer rows (a decode
// step, draft verification) keep the one-block-per-row or one-element-per-thread forms, whose threads share a
// row's loads, stores and activations (H200, one 1B row, eager: add_rms_norm 7.1 us block form, 8.3 warp
// form; qkv_prep 5.3 / 6.1; glu 4.3 / 5.1 eight-wide).
constexpr int64_t kRowFormMinRows = 128;

template <class T>
__device__ __forceinline__ void load8(const T* __restrict__ p, float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

// p[0..7] = from_f<T>(v[i]) (the rounding of a scalar store).
template <class T>
__device__ __forceinline__ void store8(T* __restrict__ p, const float (&v)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<uint32_t>(f2bf(v[2 * i])) | (static_cast<uint32_t>(f2bf(v[2 * i + 1])) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// block_sum_sq8's sum (common.cuh: lane l sums x_k² for k ≡ l mod 8 in increasing k, combine8) of the
// warp's row sx[0, d) in shared memory, computed by one warp: lanes 0..7 run the lane sums, every lane gets
// the total. The same operations in the same order, so the same bits.
// sx may hold the row as f32 or as the activation type (exact: every value there is one of T's).
template <class T>
__device__ __forceinline__ float warp_sum_sq8(const T* sx, int d, int lane) {
  float a = 0.0f;
  if (lane < 8)
#pragma unroll 8
    for (int k = lane; k < d; k += 8) {
      const float v = to_f(sx[k]);
      a += v * v;
    }
  float l[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) l[u] = __shfl_sync(0xffffffffu, a, u);
  return combine8(l);
}

}  // namespace tf::cuda
