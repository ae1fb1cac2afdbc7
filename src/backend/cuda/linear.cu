// linear: out = x · w^T (+ bias). Each output element is one thread's dot product in the CPU's
// 8-lane order (lane k % 8, increasing k, fixed combine), so a row's bits do not depend on how many
// rows the call has (DESIGN invariant 2) and equal the CPU reference's. Tiles of x and w are staged
// through shared memory as f32; the tile width is a multiple of 8, so a lane is k % 8 inside a tile.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kTileM = 32, kTileN = 32, kTileK = 32, kThreads = 256;  // 4 outputs per thread

// x[n, in_f], w[out_f, in_f], bias[out_f] or null, out[n, out_f]. grid (ceil(out_f/32), ceil(n/32)).
template <class TX, class TW, class TO>
__global__ void linear_kernel(const TX* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ bias,
                              TO* __restrict__ out, int64_t n, int64_t in_f, int64_t out_f) {
  __shared__ float xs[kTileM][kTileK + 1];
  __shared__ float ws[kTileN][kTileK + 1];
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTileM,
                j0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int tj = threadIdx.x % kTileN;  // output column inside the tile (consecutive threads: columns)
  const int ti = threadIdx.x / kTileN;  // rows ti, ti + 8, ti + 16, ti + 24
  float acc[4][8];
  for (auto& a : acc)
    for (float& v : a) v = 0.0f;
  for (int64_t k0 = 0; k0 < in_f; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTileM * kTileK; e += kThreads) {
      const int r = e / kTileK, c = e % kTileK;
      const int64_t gi = i0 + r, gk = k0 + c;
      xs[r][c] = (gi < n && gk < in_f) ? to_f(x[gi * in_f + gk]) : 0.0f;
      const int64_t gj = j0 + r;
      ws[r][c] = (gj < out_f && gk < in_f) ? to_f(w[gj * in_f + gk]) : 0.0f;
    }
    __syncthreads();
    const int kn = static_cast<int>(in_f - k0 < kTileK ? in_f - k0 : kTileK);
    for (int kk = 0; kk < kn; ++kk) {
      const float wv = ws[tj][kk];
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[r][kk & 7] += xs[ti + 8 * r][kk] * wv;
    }
    __syncthreads();
  }
  const int64_t j = j0 + tj;
  if (j >= out_f) return;
  for (int r = 0; r < 4; ++r) {
    const int64_t i = i0 + ti + 8 * r;
    if (i >= n) break;
    float v = combine8(acc[r]);
    if (bias) v += to_f(bias[j]);
    out[i * out_f + j] = from_f<TO>(v);
  }
}

template <class TX, class TW, class TO>
void run(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  const dim3 grid(blocks_for(out_f, kTileN), blocks_for(n, kTileM));
  linear_kernel<TX, TW, TO><<<grid, kThreads, 0, s>>>(ptr<const TX>(x), ptr<const TW>(w),
                                                      bias ? ptr<const TW>(*bias) : nullptr, ptr<TO>(out), n,
                                                      in_f, out_f);
  TF_CUDA_LAUNCHED();
}

}  // namespace

void launch_linear(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && out.rank() == 2);
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  TF_CHECK(w.dim(1) == in_f && out.dim(0) == n && out.dim(1) == out_f);
  TF_CHECK(is_float_act(x.dtype) && is_float_act(w.dtype) && is_float_act(out.dtype));
  // The bias shares w's dtype here (checkpoints store them together); the CPU op converts either.
  if (bias) TF_CHECK(bias->numel() == out_f && bias->dtype == w.dtype);
  if (n == 0 || out_f == 0) return;
  dispatch_act(x.dtype, [&](auto* tx) {
    dispatch_act(w.dtype, [&](auto* tw) {
      dispatch_act(out.dtype, [&](auto* to) {
        using TX = std::remove_pointer_t<decltype(tx)>;
        using TW = std::remove_pointer_t<decltype(tw)>;
        using TO = std::remove_pointer_t<decltype(to)>;
        run<TX, TW, TO>(s, x, w, bias, out);
      });
    });
  });
}

}  // namespace tf::cuda
