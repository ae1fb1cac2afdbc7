// causal_conv1d_silu: every output out[t, c] = rnd(silu(rnd(Σ_j w[c, j] xx[c, t + j]))) is independent
// (xx = [carried window | new tokens] along time), so a call over many tokens runs one thread per
// (token, channel) and then moves the window (the last K-1 raw inputs) in a second launch; a call over
// a few tokens (decode, draft verification) runs one thread per channel walking its tokens in order,
// one launch. Both sum the products in increasing j with separate f32 multiplies and adds (-fmad=false)
// and round where the CPU reference does, so each gives the CPU's bits, and one call over n tokens
// equals any split of them; the window is a copy of raw inputs, exact.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

constexpr int kMaxK = 16;
constexpr int64_t kSerialMaxTokens = 4;  // calls up to this many tokens: the one-launch serial kernel

// out = rnd(silu(rnd(acc))): F.conv1d rounds its output, SiLU rounds again.
template <class T>
__device__ __forceinline__ T conv_silu(float acc) {
  const float y = rnd<T>(acc);
  return from_f<T>(y / (1.0f + exp_f(-y)));
}

// Few tokens: x[n, C], w[C, K], state[C, K-1] in/out, out[n, C]; one thread per channel.
template <class T, class TW>
__global__ void conv_serial_kernel(const T* __restrict__ x, const TW* __restrict__ w, T* __restrict__ state,
                                   T* __restrict__ out, int64_t n, int64_t C, int K) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  float win[kMaxK], wf[kMaxK];  // win: the K-1 previous inputs, oldest first
  for (int j = 0; j < K; ++j) wf[j] = to_f(w[c * K + j]);
  for (int j = 0; j < K - 1; ++j) win[j] = to_f(state[c * (K - 1) + j]);
  for (int64_t t = 0; t < n; ++t) {
    win[K - 1] = to_f(x[t * C + c]);
    float acc = 0.0f;
    for (int j = 0; j < K; ++j) acc += wf[j] * win[j];
    out[t * C + c] = conv_silu<T>(acc);
    for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
  }
  for (int j = 0; j < K - 1; ++j) state[c * (K - 1) + j] = from_f<T>(win[j]);
}

// Many tokens: one thread per out[t, c] (c fastest); window element xx[c, t + j] is x[t + j - (K-1), c],
// or the carried state[c, t + j] where that row is before the call. Reads the state, never writes it.
template <class T, class TW>
__global__ void conv_tokens_kernel(const T* __restrict__ x, const TW* __restrict__ w,
                                   const T* __restrict__ state, T* __restrict__ out, int64_t n, int64_t C,
                                   int K) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n * C) return;
  const int64_t t = e / C, c = e % C;
  float acc = 0.0f;
  for (int j = 0; j < K; ++j) {
    const int64_t row = t + j - (K - 1);
    const float xv = row >= 0 ? to_f(x[row * C + c]) : to_f(state[c * (K - 1) + (K - 1) + row]);
    acc += to_f(w[c * K + j]) * xv;
  }
  out[e] = conv_silu<T>(acc);
}

// After conv_tokens_kernel (n >= K-1): state[c, j] = x[n - (K-1) + j, c]. One thread per (c, j).
template <class T>
__global__ void conv_window_kernel(const T* __restrict__ x, T* __restrict__ state, int64_t n, int64_t C,
                                   int K) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= C * (K - 1)) return;
  const int64_t c = e / (K - 1), j = e % (K - 1);
  state[e] = x[(n - (K - 1) + j) * C + c];
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
  const int k = static_cast<int>(K);
  TF_DISPATCH_ACT(x.dtype, T, {
    TF_DISPATCH_ACT(w.dtype, TW, {
      if (n <= kSerialMaxTokens || n < K - 1) {
        conv_serial_kernel<T, TW><<<blocks_for(C, 128), 128, 0, s>>>(ptr<const T>(x), ptr<const TW>(w),
                                                                     ptr<T>(state), ptr<T>(out), n, C, k);
        TF_CUDA_LAUNCHED();
      } else {
        conv_tokens_kernel<T, TW><<<blocks_for(n * C, 256), 256, 0, s>>>(
            ptr<const T>(x), ptr<const TW>(w), ptr<const T>(state), ptr<T>(out), n, C, k);
        TF_CUDA_LAUNCHED();
        if (K > 1) {
          conv_window_kernel<T>
              <<<blocks_for(C * (K - 1), 256), 256, 0, s>>>(ptr<const T>(x), ptr<T>(state), n, C, k);
          TF_CUDA_LAUNCHED();
        }
      }
    });
  });
}

}  // namespace tf::cuda
