// act_one: one value of a hidden_act activation with Transformers' rounding points (backend/ops.h, ActKind),
// f32 math in the CPU reference's operation order. Shared by act.cu (act, act_mul, glu) and the linear's glu
// epilogue (linear_tc_small.cuh), so both give the same bits.
#pragma once
#include "backend/cuda/common.cuh"
#include "backend/ops.h"

namespace tf::cuda {

template <ActKind K, class T>
__device__ __forceinline__ float act_one(float x) {
  if constexpr (K == ActKind::kSilu) {
    return rnd<T>(x / (1.0f + exp_f(-x)));
  } else if constexpr (K == ActKind::kGelu) {
    const float kSqrt1_2 = 0.70710678118654752440f;
    return rnd<T>(x * 0.5f * (1.0f + erf_f(x * kSqrt1_2)));
  } else if constexpr (K == ActKind::kGeluTanh) {
    const float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
    const float inner = kBeta * (x + 0.044715f * x * x * x);
    return rnd<T>(0.5f * x * (1.0f + tanh_f(inner)));
  } else if constexpr (K == ActKind::kGeluNew) {
    const float kBeta = 0.7978845608028654f;
    const float c = rnd<T>(rnd<T>(x * x) * x);
    const float d = rnd<T>(0.044715f * c);
    const float e = rnd<T>(x + d);
    const float f = rnd<T>(kBeta * e);
    const float t = rnd<T>(tanh_f(f));
    const float h = rnd<T>(1.0f + t);
    return rnd<T>(rnd<T>(0.5f * x) * h);
  } else if constexpr (K == ActKind::kQuickGelu) {
    const float z = rnd<T>(1.702f * x);
    const float s = rnd<T>(1.0f / (1.0f + exp_f(-z)));
    return rnd<T>(x * s);
  } else {
    static_assert(K == ActKind::kRelu);
    return x < 0.0f ? 0.0f : x;  // NaN and -0 pass through, as torch.relu
  }
}

}  // namespace tf::cuda
