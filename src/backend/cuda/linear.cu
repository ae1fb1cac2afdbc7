// linear: out = x · w^T (+ bias). bf16 x and w go to the tensor-core kernel (linear_tc.cu); the rest
// (f32 activations or weights) runs here, the CPU reference's arithmetic exactly. Every output element is the
// CPU's dot product exactly: lane l (k ≡ l mod 8) accumulates in increasing k, and the 8 lanes combine as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Here the 8 lanes of an output live in 8 adjacent threads of a
// warp (so one thread holds 8×4 outputs of one lane: 32 accumulators instead of 256), and the final
// combine is three butterfly shuffles, which build that tree exactly (IEEE addition commutes). So a
// row's bits do not depend on how many rows the call has (docs/design.md, invariant 2) and equal the CPU
// reference's. Tiles of x and w are staged through shared memory as f32; the K tile is a multiple of
// 8, so a lane is k % 8 inside a tile.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kTileM = 64, kTileN = 32, kTileK = 32;  // outputs per block: 64 rows × 32 columns
constexpr int kMicroM = 8, kMicroN = 4;               // outputs per thread (one lane of each)
constexpr int kThreads = (kTileM / kMicroM) * (kTileN / kMicroN) * 8;  // 512

// x[n, in_f], w[out_f, in_f], bias[out_f] or null, out[n, out_f]. grid (ceil(out_f/32), ceil(n/64)).
template <class TX, class TW, class TO>
__global__ void __launch_bounds__(kThreads)
    linear_kernel(const TX* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ bias,
                  TO* __restrict__ out, int64_t n, int64_t in_f, int64_t out_f) {
  __shared__ float xs[kTileM][kTileK + 1];
  __shared__ float ws[kTileN][kTileK + 1];
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTileM,
                j0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int lane = threadIdx.x % 8;           // k ≡ lane (mod 8)
  const int micro = threadIdx.x / 8;          // which 8×4 micro tile
  const int mi = micro / (kTileN / kMicroN);  // rows mi*8 .. mi*8+7
  const int mj = micro % (kTileN / kMicroN);  // columns mj*4 .. mj*4+3
  float acc[kMicroM][kMicroN];
#pragma unroll
  for (int a = 0; a < kMicroM; ++a)
#pragma unroll
    for (int b = 0; b < kMicroN; ++b) acc[a][b] = 0.0f;
  for (int64_t k0 = 0; k0 < in_f; k0 += kTileK) {
    for (int e = threadIdx.x; e < kTileM * kTileK; e += kThreads) {
      const int r = e / kTileK, c = e % kTileK;
      const int64_t gi = i0 + r, gk = k0 + c;
      xs[r][c] = (gi < n && gk < in_f) ? to_f(x[gi * in_f + gk]) : 0.0f;
    }
    for (int e = threadIdx.x; e < kTileN * kTileK; e += kThreads) {
      const int r = e / kTileK, c = e % kTileK;
      const int64_t gj = j0 + r, gk = k0 + c;
      ws[r][c] = (gj < out_f && gk < in_f) ? to_f(w[gj * in_f + gk]) : 0.0f;
    }
    __syncthreads();
    const int kn = static_cast<int>(in_f - k0 < kTileK ? in_f - k0 : kTileK);
    for (int kk = lane; kk < kn; kk += 8) {
      float xv[kMicroM], wv[kMicroN];
#pragma unroll
      for (int a = 0; a < kMicroM; ++a) xv[a] = xs[mi * kMicroM + a][kk];
#pragma unroll
      for (int b = 0; b < kMicroN; ++b) wv[b] = ws[mj * kMicroN + b][kk];
#pragma unroll
      for (int a = 0; a < kMicroM; ++a)
#pragma unroll
        for (int b = 0; b < kMicroN; ++b) acc[a][b] += xv[a] * wv[b];
    }
    __syncthreads();
  }
  // Combine the 8 lanes: xor 1 -> (l0+l1), xor 2 -> (..)+(l2+l3), xor 4 -> the full tree.
#pragma unroll
  for (int a = 0; a < kMicroM; ++a)
#pragma unroll
    for (int b = 0; b < kMicroN; ++b) {
      float v = acc[a][b];
      v = v + __shfl_xor_sync(0xffffffffu, v, 1);
      v = v + __shfl_xor_sync(0xffffffffu, v, 2);
      v = v + __shfl_xor_sync(0xffffffffu, v, 4);
      acc[a][b] = v;
    }
    // Lane l writes column b == l % 4 of rows a with a % 2 == l / 4 (each output written once).
#pragma unroll
  for (int a = 0; a < kMicroM; ++a)
#pragma unroll
    for (int b = 0; b < kMicroN; ++b) {
      if (b != lane % kMicroN || a % 2 != lane / kMicroN) continue;
      const int64_t i = i0 + mi * kMicroM + a, j = j0 + mj * kMicroN + b;
      if (i >= n || j >= out_f) continue;
      float v = acc[a][b];
      if (bias) v += to_f(bias[j]);
      out[i * out_f + j] = from_f<TO>(v);
    }
}

// Few rows (decode, draft verification): one output column per 8 threads (its 8 lanes), streaming
// the weight row once for all n <= 8 input rows; the same lane order and butterfly combine as the
// tiled kernel, so a row's bits are the same whichever kernel computes it. 32 columns per block.
constexpr int kGemvMaxRows = 8, kGemvThreads = 256;

template <class TX, class TW, class TO>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(const TX* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ bias,
                TO* __restrict__ out, int n, int64_t in_f, int64_t out_f) {
  const int lane = threadIdx.x % 8;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (kGemvThreads / 8) + threadIdx.x / 8;
  float acc[kGemvMaxRows];
#pragma unroll
  for (float& a : acc) a = 0.0f;
  if (j < out_f) {
    const TW* wr = w + j * in_f;
    for (int64_t k = lane; k < in_f; k += 8) {
      const float wv = to_f(wr[k]);
#pragma unroll
      for (int i = 0; i < kGemvMaxRows; ++i)
        if (i < n) acc[i] += to_f(x[i * in_f + k]) * wv;
    }
  }
#pragma unroll
  for (int i = 0; i < kGemvMaxRows; ++i) {
    if (i >= n) break;  // n is the same for the whole warp: the shuffles stay converged
    float v = acc[i];
    v = v + __shfl_xor_sync(0xffffffffu, v, 1);
    v = v + __shfl_xor_sync(0xffffffffu, v, 2);
    v = v + __shfl_xor_sync(0xffffffffu, v, 4);
    if (lane == i % 8 && j < out_f) {
      if (bias) v += to_f(bias[j]);
      out[i * out_f + j] = from_f<TO>(v);
    }
  }
}

template <class TX, class TW, class TO>
void run(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  if (n <= kGemvMaxRows) {
    gemv_kernel<TX, TW, TO><<<blocks_for(out_f, kGemvThreads / 8), kGemvThreads, 0, s>>>(
        ptr<const TX>(x), ptr<const TW>(w), bias ? ptr<const TW>(*bias) : nullptr, ptr<TO>(out),
        static_cast<int>(n), in_f, out_f);
    TF_CUDA_LAUNCHED();
    return;
  }
  const dim3 grid(blocks_for(out_f, kTileN), blocks_for(n, kTileM));
  TF_CHECK(blocks_for(n, kTileM) <= 65535);
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
  if (linear_tc_applies(x, w)) return launch_linear_tc(s, x, w, bias, out);
  TF_DISPATCH_ACT(x.dtype, TX, {
    TF_DISPATCH_ACT(w.dtype, TW,
                    { TF_DISPATCH_ACT(out.dtype, TO, { run<TX, TW, TO>(s, x, w, bias, out); }); });
  });
}

void launch_linear_many(cudaStream_t s, const Tensor& x, std::span<const Tensor> w,
                        std::span<const Tensor> out) {
  TF_CHECK(w.size() == out.size() && x.rank() == 2);
  for (size_t i = 0; i < w.size(); ++i) {
    TF_CHECK(w[i].rank() == 2 && out[i].rank() == 2 && w[i].dim(1) == x.dim(1) && out[i].dim(0) == x.dim(0) &&
             out[i].dim(1) == w[i].dim(0));
    TF_CHECK(is_float_act(w[i].dtype) && is_float_act(out[i].dtype));
  }
  if (x.dim(0) == 0) return;
  if (launch_linear_tc_many(s, x, w, out)) return;
  for (size_t i = 0; i < w.size(); ++i) launch_linear(s, x, w[i], nullptr, out[i]);
}

}  // namespace tf::cuda
