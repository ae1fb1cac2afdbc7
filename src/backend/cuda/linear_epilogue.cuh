// The tensor-core linears' store of one mma C fragment (linear_tc_large.cu, linear_tc_wgmma_sm90a.cu): the
// fragment's running sums v = {(i, j), (i, j + 1), (i + 8, j), (i + 8, j + 1)}, + bias in f32, one rounding,
// rows at or past n and columns at or past out_f not stored; the two columns of a row as one 4-byte (bf16)
// or 8-byte (f32) store where `pair` (out_f even and out aligned for it).
//
// Shapes: out [n, out_f] bf16 or f32, bias [out_f] bf16 or null.
#pragma once
#include "backend/cuda/common.cuh"

namespace tf::cuda {

template <class TO>
__device__ __forceinline__ void store_fragment(TO* __restrict__ out, const bf16_t* __restrict__ bias,
                                               float (&v)[4], int i, int j, int n, int out_f, bool pair) {
  if (j >= out_f) return;
  const bool j1 = j + 1 < out_f;
  if (bias) {
    const float b0 = to_f(bias[j]), b1 = j1 ? to_f(bias[j + 1]) : 0.0f;
    v[0] += b0, v[2] += b0, v[1] += b1, v[3] += b1;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = i + h * 8;
    if (r >= n) continue;
    TO* o = out + static_cast<int64_t>(r) * out_f + j;
    if (pair && j1) {
      if constexpr (sizeof(TO) == 2) {
        const uint32_t lo = f2bf(v[2 * h]), hi = f2bf(v[2 * h + 1]);
        *reinterpret_cast<uint32_t*>(o) = lo | (hi << 16);
      } else {
        *reinterpret_cast<float2*>(o) = make_float2(v[2 * h], v[2 * h + 1]);
      }
    } else {
      o[0] = from_f<TO>(v[2 * h]);
      if (j1) o[1] = from_f<TO>(v[2 * h + 1]);
    }
  }
}

}  // namespace tf::cuda
