// causal_conv1d_silu over every segment of a step on a pool of windows (ops.h
// causal_conv1d_silu_slots). Each output is causal_conv1d.cu's: rnd(silu(rnd(Σ_j w[c, j] xx[c, t + j])))
// summed in increasing j with separate f32 multiplies and adds (-fmad=false), the CPU's bits; a kept or
// carried window is a copy of raw inputs, exact. So whichever kernel runs a segment, and whatever else
// is in the step, its bits are the one-sequence op's.
//  - one row per segment on average (decode, draft verification): one launch, a thread per
//    (segment, channel) walking its rows in order, writing kept windows as it passes them;
//  - otherwise (prefill in the step): a thread per (row, channel) reading the carried windows, then a
//    thread per (segment, channel) that writes the kept windows and moves the carried one.
// The output may be up to three matrices taking consecutive column ranges (a Gated DeltaNet layer's q | k |
// v): each value is stored where its column's part holds it, nothing else changes.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

constexpr int kMaxK = 16;

template <class T>
__device__ __forceinline__ T conv_silu(float acc) {
  const float y = rnd<T>(acc);
  return from_f<T>(y / (1.0f + exp_f(-y)));
}

// The output's column parts: columns [end[i-1], end[i]) are part i, [n, end[i] - end[i-1]] row-major.
template <class T>
struct OutCols {
  T* p[3];
  int64_t end[3];
  __device__ T& at(int64_t row, int64_t c) const {
    const int i = c < end[0] ? 0 : c < end[1] ? 1 : 2;
    const int64_t c0 = i == 0 ? 0 : end[i - 1];
    return p[i][row * (end[i] - c0) + c - c0];
  }
};

// Segment s of segs[n_seg, 6]: {r0, r1, slot, pos0, keep0, keep_step}.
struct ConvSeg {
  int64_t r0, n, slot, pos0, keep0, step;
  // keep index of the window after the segment's row t, or -1.
  __device__ int64_t kept(int64_t t) const {
    const int64_t p = pos0 + t + 1;
    return keep0 < 0 || p % step ? -1 : keep0 + p / step - pos0 / step - 1;
  }
};
__device__ ConvSeg conv_seg(const int32_t* segs, int64_t s) {
  const int32_t* r = segs + s * 6;
  return ConvSeg{r[0], r[1] - r[0], r[2], r[3], r[4], r[5] > 0 ? r[5] : 1};
}

// grid (ceil(C / 128), n_seg): thread (segment, c) walks its rows; windows[n_slots, C, K-1] in/out.
template <class T, class TW>
__global__ void conv_slots_serial_kernel(const T* __restrict__ x, const TW* __restrict__ w, T* windows,
                                         const int32_t* __restrict__ segs, OutCols<T> out, T* keep, int64_t C,
                                         int K) {
  pdl_wait();  // pdl.cuh (the decode step's form)
  pdl_trigger();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const ConvSeg sg = conv_seg(segs, blockIdx.y);
  const int64_t wc = static_cast<int64_t>(K - 1) * C;  // one window: [C, K-1]
  T* state = windows + sg.slot * wc + c * (K - 1);
  float win[kMaxK], wf[kMaxK];  // win: the K-1 previous inputs, oldest first
  for (int j = 0; j < K; ++j) wf[j] = to_f(w[c * K + j]);
  for (int j = 0; j < K - 1; ++j) win[j] = to_f(state[j]);
  for (int64_t t = 0; t < sg.n; ++t) {
    const int64_t row = sg.r0 + t;
    win[K - 1] = to_f(x[row * C + c]);
    float acc = 0.0f;
    for (int j = 0; j < K; ++j) acc += wf[j] * win[j];
    out.at(row, c) = conv_silu<T>(acc);
    for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
    if (const int64_t kp = sg.kept(t); kp >= 0 && keep)
      for (int j = 0; j < K - 1; ++j) keep[kp * wc + c * (K - 1) + j] = from_f<T>(win[j]);
  }
  if (sg.n > 0)
    for (int j = 0; j < K - 1; ++j) state[j] = from_f<T>(win[j]);
}

// grid (X, n_seg): the segment's (t, c) elements in a grid-stride loop; reads the windows only.
template <class T, class TW>
__global__ void conv_slots_tokens_kernel(const T* __restrict__ x, const TW* __restrict__ w,
                                         const T* __restrict__ windows, const int32_t* __restrict__ segs,
                                         OutCols<T> out, int64_t C, int K) {
  const ConvSeg sg = conv_seg(segs, blockIdx.y);
  const T* state = windows + sg.slot * static_cast<int64_t>(K - 1) * C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < sg.n * C;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / C, c = e % C;
    float acc = 0.0f;
    for (int j = 0; j < K; ++j) {
      const int64_t i = t + j - (K - 1);  // segment row, or before the segment: the carried window
      const float xv = i >= 0 ? to_f(x[(sg.r0 + i) * C + c]) : to_f(state[c * (K - 1) + (K - 1) + i]);
      acc += to_f(w[c * K + j]) * xv;
    }
    out.at(sg.r0 + t, c) = conv_silu<T>(acc);
  }
}

// After conv_slots_tokens_kernel. grid (ceil(C / 128), n_seg): thread (segment, c) writes the kept
// windows and then the carried one; xx = [old window | segment rows], window after row t = xx[t+1 .. t+K-1].
template <class T>
__global__ void conv_slots_window_kernel(const T* __restrict__ x, T* windows,
                                         const int32_t* __restrict__ segs, T* keep, int64_t C, int K) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= C) return;
  const ConvSeg sg = conv_seg(segs, blockIdx.y);
  if (sg.n <= 0) return;
  const int64_t wc = static_cast<int64_t>(K - 1) * C;
  T* state = windows + sg.slot * wc + c * (K - 1);
  T old[kMaxK];
  for (int j = 0; j < K - 1; ++j) old[j] = state[j];
  auto xx = [&](int64_t i) { return i < K - 1 ? old[i] : x[(sg.r0 + i - (K - 1)) * C + c]; };
  if (keep && sg.keep0 >= 0)
    for (int64_t p = (sg.pos0 / sg.step + 1) * sg.step; p <= sg.pos0 + sg.n; p += sg.step) {
      const int64_t t = p - 1 - sg.pos0, kp = sg.kept(t);
      for (int j = 0; j < K - 1; ++j) keep[kp * wc + c * (K - 1) + j] = xx(t + 1 + j);
    }
  for (int j = 0; j < K - 1; ++j) state[j] = xx(sg.n + j);
}

}  // namespace

void launch_causal_conv1d_silu_slots(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& windows,
                                     const Tensor& segs, std::span<const Tensor> out, const Tensor* keep) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && windows.rank() == 3);
  const int64_t n = x.dim(0), C = x.dim(1), K = w.dim(1), n_seg = segs.dim(0);
  const opcheck::ColumnParts parts = opcheck::column_parts(out, n, C, x.dtype, x.data);
  opcheck::slot_segs_shape(segs);
  TF_CHECK(K >= 1 && K <= kMaxK && w.dim(0) == C && windows.dim(1) == C && windows.dim(2) == K - 1);
  TF_CHECK(is_float_act(x.dtype) && windows.dtype == x.dtype && is_float_act(w.dtype));
  TF_CHECK(!keep ||
           (keep->rank() == 3 && keep->dtype == x.dtype && keep->dim(1) == C && keep->dim(2) == K - 1));
  TF_CHECK(n_seg <= 65535);
  if (n == 0 || C == 0 || n_seg == 0) return;
  const int k = static_cast<int>(K);
  const dim3 per_channel(blocks_for(C, 128), static_cast<unsigned>(n_seg));
  TF_DISPATCH_ACT(x.dtype, T, {
    T* kp = keep ? ptr<T>(*keep) : nullptr;
    OutCols<T> oc{{nullptr, nullptr, nullptr}, {parts.end[0], parts.end[1], parts.end[2]}};
    for (size_t i = 0; i < out.size(); ++i) oc.p[i] = ptr<T>(out[i]);
    TF_DISPATCH_ACT(w.dtype, TW, {
      if (n <= 2 * n_seg || K == 1) {
        launch_pdl(s, per_channel, dim3(128), 0, conv_slots_serial_kernel<T, TW>, ptr<const T>(x),
                   ptr<const TW>(w), ptr<T>(windows), ptr<const int32_t>(segs), oc, kp, C, k);
      } else {
        // Blocks per segment: enough for an average segment (any count gives the same bits).
        const int64_t avg = (n + n_seg - 1) / n_seg;
        const dim3 grid(std::min<unsigned>(blocks_for(avg * C, 256), 4096u), static_cast<unsigned>(n_seg));
        conv_slots_tokens_kernel<T, TW><<<grid, 256, 0, s>>>(
            ptr<const T>(x), ptr<const TW>(w), ptr<const T>(windows), ptr<const int32_t>(segs), oc, C, k);
        TF_CUDA_LAUNCHED();
        conv_slots_window_kernel<T><<<per_channel, 128, 0, s>>>(ptr<const T>(x), ptr<T>(windows),
                                                                ptr<const int32_t>(segs), kp, C, k);
        TF_CUDA_LAUNCHED();
      }
    });
  });
}

}  // namespace tf::cuda
