// The tensor-core linears' store of one mma C fragment (linear_tc_large.cu, linear_tc_wgmma_sm90a.cu): the
// fragment's running sums v = {(i, j), (i, j + 1), (i + 8, j), (i + 8, j + 1)}, + bias in f32, one rounding,
// rows at or past n and columns at or past out_f not stored; the two columns of a row as one 4-byte (bf16)
// or 8-byte (f32) store where `pair` (out_f even and out aligned for it).
//
// Shapes: out [n, out_f] bf16 or f32, bias [out_f] bf16 or null.
#pragma once
#include "backend/cuda/common.cuh"

namespace tf::cuda {

// v += bias of columns j and (where j1) j + 1, in f32.
__device__ __forceinline__ void add_bias(const bf16_t* __restrict__ bias, float (&v)[4], int j, bool j1) {
  if (!bias) return;
  const float b0 = to_f(bias[j]), b1 = j1 ? to_f(bias[j + 1]) : 0.0f;
  v[0] += b0, v[2] += b0, v[1] += b1, v[3] += b1;
}

template <class TO>
__device__ __forceinline__ void store_fragment(TO* __restrict__ out, const bf16_t* __restrict__ bias,
                                               float (&v)[4], int i, int j, int n, int out_f, bool pair) {
  if (j >= out_f) return;
  const bool j1 = j + 1 < out_f;
  add_bias(bias, v, j, j1);
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

// The linear-then-add epilogue (Backend::linear_add as one kernel, linear_tc_wgmma_sm90a.cu): h[r, j] =
// rnd(h + rnd(v + bias)) in place, h [n, out_f] bf16 (linear's rounding, then add's: the same two roundings
// and the same f32 sum as the two ops). planted: v + bias left unrounded (the contract's control).
__device__ __forceinline__ void add_fragment(bf16_t* __restrict__ h, const bf16_t* __restrict__ bias,
                                             float (&v)[4], int i, int j, int n, int out_f, bool pair,
                                             bool planted) {
  if (j >= out_f) return;
  const bool j1 = j + 1 < out_f;
  add_bias(bias, v, j, j1);
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = i + hh * 8;
    if (r >= n) continue;
    const bf16_t* o = h + static_cast<int64_t>(r) * out_f + j;
#pragma unroll
    for (int c = 0; c < 2; ++c)
      if (c == 0 || j1) v[2 * hh + c] = to_f(o[c]) + (planted ? v[2 * hh + c] : rnd<bf16_t>(v[2 * hh + c]));
  }
  store_fragment(h, nullptr, v, i, j, n, out_f, pair);
}

}  // namespace tf::cuda
