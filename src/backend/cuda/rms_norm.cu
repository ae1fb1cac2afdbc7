// rms_norm: one block per row; Σx² in the CPU's 8-lane order (lane l sums x_k² for k ≡ l mod 8 in
// increasing k, the lanes combine as combine8), then the elementwise normalisation with the rounding
// points of RmsNormKind. Rows up to kMaxStaged wide are first copied to shared memory as f32 by the whole
// block (coalesced, all loads in flight at once); the 8 lanes then run their sequential sums from shared
// memory, 8 independent loads ahead of the adds, and the normalisation reads the row from there too.
// (The 8 lanes reading global memory one element per dependent add made a one-row call of width 1024
// take ~9 µs on the H200.) Wider rows keep the direct form; both give the CPU's bits. Calls of >= 128 rows
// (vec8.cuh kRowFormMinRows) of d % 8 == 0 elements (every model's hidden size) run the warp form,
// rms_norm_warp_kernel below: the same statements.
#include <algorithm>
#include <initializer_list>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vec8.cuh"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxStaged = 8192;  // f32 row in shared memory: 32 KB, under the 48 KB default
constexpr int kPre = 16;  // add_rms_norm: elements per thread held in registers (rows up to 4,096 wide)

// x, out [n, d] act; w [d] (TW). grid n; dynamic shared memory d floats when staged.
template <class T, class TW>
__global__ void rms_norm_kernel(const T* __restrict__ x, const TW* __restrict__ w, float eps, bool one_plus,
                                T* __restrict__ out, int64_t d, bool staged) {
  extern __shared__ float srow[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t r = blockIdx.x;
  const T* row = x + r * d;
  float ss;
  if (staged) {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) srow[i] = to_f(row[i]);
    __syncthreads();
    ss = block_sum_sq8(d, [&](int64_t k) { return srow[k]; });
  } else {
    ss = block_sum8(d, [&](int64_t k) {
      const float v = to_f(row[k]);
      return v * v;
    });
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = staged ? srow[i] : to_f(row[i]), wi = to_f(w[i]);
    const float y = one_plus ? v * inv * (1.0f + wi) : rnd<T>(wi * rnd<T>(v * inv));
    out[r * d + i] = from_f<T>(y);
  }
}

// add_rms_norm: h[r] = rnd(h[r] + delta[r]) written back (what `add` writes) and staged as f32, then the
// staged form of rms_norm_kernel over it. grid n; dynamic shared memory d floats.
template <class T, class TW>
__global__ void add_rms_norm_kernel(T* __restrict__ h, const T* __restrict__ delta, const TW* __restrict__ w,
                                    float eps, bool one_plus, T* __restrict__ out, int64_t d) {
  extern __shared__ float srow[];
  // The weight, which no kernel writes, read before waiting for the previous kernel (pdl.cuh): off the
  // decode step's critical path where the row fits kPre elements per thread; so are the row's loads, all
  // issued before the first add (a loop of dependent round trips made a 2,560-wide row take ~10 us).
  float wpre[kPre];
  const bool pre = d <= kPre * static_cast<int64_t>(blockDim.x);
  if (pre)
#pragma unroll
    for (int u = 0; u < kPre; ++u) {
      const int64_t i = threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      wpre[u] = i < d ? to_f(w[i]) : 0.0f;
    }
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t r = blockIdx.x;
  if (pre) {
    float hv[kPre], dv[kPre];
#pragma unroll
    for (int u = 0; u < kPre; ++u) {
      const int64_t i = threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      hv[u] = i < d ? to_f(h[r * d + i]) : 0.0f;
      dv[u] = i < d ? to_f(delta[r * d + i]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kPre; ++u) {
      const int64_t i = threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      if (i >= d) break;
      const T v = from_f<T>(hv[u] + dv[u]);
      h[r * d + i] = v;
      srow[i] = to_f(v);
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const T v = from_f<T>(to_f(h[r * d + i]) + to_f(delta[r * d + i]));
      h[r * d + i] = v;
      srow[i] = to_f(v);
    }
  }
  __syncthreads();
  const float ss = block_sum_sq8(d, [&](int64_t k) { return srow[k]; });
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  auto put = [&](int64_t i, float wi) {
    const float v = srow[i];
    const float y = one_plus ? v * inv * (1.0f + wi) : rnd<T>(wi * rnd<T>(v * inv));
    out[r * d + i] = from_f<T>(y);
  };
  if (pre) {
#pragma unroll
    for (int u = 0; u < kPre; ++u) {
      const int64_t i = threadIdx.x + u * static_cast<int64_t>(blockDim.x);
      if (i < d) put(i, wpre[u]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) put(i, to_f(w[i]));
  }
}

// The warp form of both kernels above (rows of d % 8 == 0 elements, 16-byte aligned): one warp per row, a
// block of rpb rows, the row staged in the warp's slice of shared memory in 8-element vectors, the sum of
// squares by lanes 0..7 in block_sum_sq8's order (vec8.cuh warp_sum_sq8), then the same normalisation
// statements: the same bits, without the block-wide barriers that left 248 of 256 threads waiting on the 8
// lane sums (a [9350, 1024] call: ~46 us in the block form, the rows now in flight 8 per block). ADD: the
// residual add of add_rms_norm_kernel first (h[r] = rnd(h[r] + delta[r]) written back).
template <class T, class TW, bool ADD>
__global__ void __launch_bounds__(256)
    rms_norm_warp_kernel(T* x, const T* __restrict__ delta, const TW* __restrict__ w, float eps,
                         bool one_plus, T* out, int64_t n, int d) {  // out may alias x (rms_norm in place)
  extern __shared__ float srow[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp;
  if (r >= n) return;
  // The row staged as T (its values are T's, so exact), each lane's 8 elements one 16-byte access: no bank
  // conflicts (an f32 element at a time was an 8-way conflict on every store).
  T* sx = reinterpret_cast<T*>(srow) + static_cast<int64_t>(warp) * d;
  T* row = x + r * d;
  for (int c = lane * 8; c < d; c += 256) {
    float v[8];
    load8(row + c, v);
    if constexpr (ADD) {
      float dv[8];
      load8(delta + r * d + c, dv);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = rnd<T>(v[i] + dv[i]);
      store8(row + c, v);
    }
    store8(sx + c, v);
  }
  __syncwarp();
  const float ss = warp_sum_sq8(sx, d, lane);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int c = lane * 8; c < d; c += 256) {
    float wv[8], y[8], xv[8];
    load8(w + c, wv);
    load8(sx + c, xv);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float v = xv[i];
      y[i] = one_plus ? v * inv * (1.0f + wv[i]) : rnd<T>(wv[i] * rnd<T>(v * inv));
    }
    store8(out + r * d + c, y);
  }
}

// Rows per block of the warp form: its shared memory (rpb * d floats) kept within kMaxStaged floats (32 KB);
// 0 where the warp form does not apply, or where the call has too few rows for it to pay (kRowFormMinRows).
int warp_rows_per_block(int64_t n, int64_t d, std::initializer_list<const void*> ptrs) {
  if (n < kRowFormMinRows || d <= 0 || d % 8 != 0 || d > kMaxStaged) return 0;
  for (const void* p : ptrs)
    if (!aligned16(p)) return 0;
  return static_cast<int>(std::min<int64_t>(8, kMaxStaged / d));
}

template <bool ADD>
void launch_warp_form(cudaStream_t s, const Tensor& x, const Tensor* delta, const Tensor& w, float eps,
                      RmsNormKind kind, const Tensor& out, int64_t n, int64_t d, int rpb) {
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      launch_pdl(s, dim3(blocks_for(n, rpb)), dim3(32 * rpb), static_cast<size_t>(rpb) * d * sizeof(float),
                 rms_norm_warp_kernel<T, TW, ADD>, ptr<T>(x), delta ? ptr<const T>(*delta) : nullptr,
                 ptr<const TW>(w), eps, kind == RmsNormKind::kOnePlusWeight, ptr<T>(out), n,
                 static_cast<int>(d));
    });
  });
}

}  // namespace

void launch_add_rms_norm(cudaStream_t s, const Tensor& h, const Tensor& delta, const Tensor& w, float eps,
                         RmsNormKind kind, const Tensor& out) {
  TF_CHECK(h.shape == delta.shape && h.dtype == delta.dtype && out.numel() == h.numel());
  TF_CHECK(out.data != h.data && out.data != delta.data);
  const int64_t d = h.dim(-1), n = d ? h.numel() / d : 0;
  if (d > kMaxStaged) {  // the two ops in turn: the same bits
    launch_add(s, h, delta, h);
    launch_rms_norm(s, h, w, eps, kind, out);
    return;
  }
  TF_CHECK(w.numel() == d && is_float_act(w.dtype) && out.dtype == h.dtype && is_float_act(h.dtype));
  if (kind == RmsNormKind::kWeight) TF_CHECK(w.dtype == h.dtype);
  if (n == 0) return;
  if (const int rpb = warp_rows_per_block(n, d, {h.data, delta.data, w.data, out.data}))
    return launch_warp_form<true>(s, h, &delta, w, eps, kind, out, n, d, rpb);
  TF_DISPATCH_ACT(h.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      launch_pdl(s, dim3(static_cast<unsigned>(n)), dim3(kThreads), d * sizeof(float),
                 add_rms_norm_kernel<T, TW>, ptr<T>(h), ptr<const T>(delta), ptr<const TW>(w), eps,
                 kind == RmsNormKind::kOnePlusWeight, ptr<T>(out), d);
    });
  });
}

void launch_rms_norm(cudaStream_t s, const Tensor& x, const Tensor& w, float eps, RmsNormKind kind,
                     const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d && is_float_act(w.dtype));
  if (kind == RmsNormKind::kWeight) TF_CHECK(w.dtype == x.dtype);
  if (n == 0) return;
  if (const int rpb = warp_rows_per_block(n, d, {x.data, w.data, out.data}))
    return launch_warp_form<false>(s, x, nullptr, w, eps, kind, out, n, d, rpb);
  const bool staged = d <= kMaxStaged;
  const size_t smem = staged ? static_cast<size_t>(d) * sizeof(float) : 0;
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      launch_pdl(s, dim3(static_cast<unsigned>(n)), dim3(kThreads), smem, rms_norm_kernel<T, TW>,
                 ptr<const T>(x), ptr<const TW>(w), eps, kind == RmsNormKind::kOnePlusWeight, ptr<T>(out), d,
                 staged);
    });
  });
}

}  // namespace tf::cuda
