// causal_conv1d_silu: one thread per channel walks the tokens in order over [carried window | new
// tokens]; conv output rounded, SiLU rounded; the last K-1 inputs become the new window.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kMaxK = 16;

// x[n, C], w[C, K], state[C, K-1] in/out, out[n, C].
template <class T, class TW>
__global__ void conv_kernel(const T* __restrict__ x, const TW* __restrict__ w, T* __restrict__ state,
                            T* __restrict__ out, int64_t n, int64_t C, int K) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  float win[kMaxK], wf[kMaxK];  // win: the K-1 previous inputs, oldest first
  for (int j = 0; j < K; ++j) wf[j] = to_f(w[c * K + j]);
  for (int j = 0; j < K - 1; ++j) win[j] = to_f(state[c * (K - 1) + j]);
  for (int64_t t = 0; t < n; ++t) {
    const float xt = to_f(x[t * C + c]);
    win[K - 1] = xt;
    float acc = 0.0f;
    for (int j = 0; j < K; ++j) acc += wf[j] * win[j];
    const float y = rnd<T>(acc);
    out[t * C + c] = from_f<T>(y / (1.0f + exp_f(-y)));
    for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
  }
  for (int j = 0; j < K - 1; ++j) state[c * (K - 1) + j] = from_f<T>(win[j]);
}

}  // namespace

void launch_causal_conv1d_silu(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& state,
                               const Tensor& out) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && state.rank() == 2 && out.numel() == x.numel());
  const int64_t n = x.dim(0), C = x.dim(1), K = w.dim(1);
  TF_CHECK(K >= 1 && K <= kMaxK && w.dim(0) == C && state.dim(0) == C && state.dim(1) == K - 1);
  TF_CHECK(is_float_act(x.dtype) && out.dtype == x.dtype && state.dtype == x.dtype && is_float_act(w.dtype));
  TF_CHECK(out.data != x.data);
  if (n == 0 || C == 0) return;
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      conv_kernel<T, TW><<<blocks_for(C, 128), 128, 0, s>>>(ptr<const T>(x), ptr<const TW>(w), ptr<T>(state),
                                                            ptr<T>(out), n, C, static_cast<int>(K));
      TF_CUDA_LAUNCHED();
    });
  });
}

}  // namespace tf::cuda
