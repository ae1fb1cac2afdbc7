// act and act_mul: the hidden_act activations with Transformers' rounding points (backend/ops.h,
// ActKind), f32 math; act_mul rounds a(gate) and then the product (two roundings).
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

namespace tf::cpu {
namespace {

// SiLU given e = exp(-x) (run computes e eight at a time).
inline float silu_of(float x, float e, DType dt) { return rnd(x / (1.0f + e), dt); }

// The other kinds, one value at a time.
template <ActKind K>
float act_one(float x, DType dt) {
  if constexpr (K == ActKind::kGelu) {
    const float kSqrt1_2 = 0.70710678118654752440f;
    return rnd(x * 0.5f * (1.0f + fm::erf(x * kSqrt1_2)), dt);
  } else if constexpr (K == ActKind::kGeluTanh) {
    const float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
    const float inner = kBeta * (x + 0.044715f * x * x * x);
    return rnd(0.5f * x * (1.0f + fm::tanh(inner)), dt);
  } else if constexpr (K == ActKind::kGeluNew) {
    // NewGELUActivation: 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0)))), one
    // rounding per torch op (pow(x, 3) runs as x * x * x in act).
    const float kBeta = 0.7978845608028654f;
    const float c = rnd(rnd(x * x, dt) * x, dt);
    const float d = rnd(0.044715f * c, dt);
    const float e = rnd(x + d, dt);
    const float f = rnd(kBeta * e, dt);
    const float t = rnd(fm::tanh(f), dt);
    const float h = rnd(1.0f + t, dt);
    return rnd(rnd(0.5f * x, dt) * h, dt);
  } else if constexpr (K == ActKind::kQuickGelu) {
    const float z = rnd(1.702f * x, dt);
    const float s = rnd(1.0f / (1.0f + fm::exp(-z)), dt);
    return rnd(x * s, dt);
  } else {
    static_assert(K == ActKind::kRelu);
    return x < 0.0f ? 0.0f : x;  // NaN and -0 pass through, as torch.relu
  }
}

// out[i] = a(gate[i]) (up == nullptr) or rnd(a(gate[i]) * up[i]), in chunks on the pool.
template <ActKind K>
void run(ThreadPool& pool, const Tensor& gate, const Tensor* up, const Tensor& out) {
  const DType dt = gate.dtype;
  constexpr int64_t kChunk = 4096;
  const int64_t n = gate.numel(), n_chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> g(kChunk), u(up ? kChunk : 0), e(K == ActKind::kSilu ? kChunk : 0);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
      load_f32_row(gate, off, len, g.data());
      if constexpr (K == ActKind::kSilu) {  // e^-x by exp_row (fm::exp's bits, eight at a time)
        for (int64_t i = 0; i < len; ++i) e[i] = -g[i];
        exp_row(e.data(), 0.0f, len, e.data());  // -x - 0 is -x, -0 and NaNs too
        for (int64_t i = 0; i < len; ++i) g[i] = silu_of(g[i], e[i], dt);
      } else {
        for (int64_t i = 0; i < len; ++i) g[i] = act_one<K>(g[i], dt);
      }
      if (up) {
        load_f32_row(*up, off, len, u.data());
        for (int64_t i = 0; i < len; ++i) g[i] = rnd(g[i] * u[i], dt);
      }
      store_f32_row(out, off, len, g.data());
    }
  });
}

void dispatch(ThreadPool& pool, const Tensor& gate, const Tensor* up, ActKind kind, const Tensor& out) {
  switch (kind) {
    case ActKind::kSilu:
      return run<ActKind::kSilu>(pool, gate, up, out);
    case ActKind::kGelu:
      return run<ActKind::kGelu>(pool, gate, up, out);
    case ActKind::kGeluTanh:
      return run<ActKind::kGeluTanh>(pool, gate, up, out);
    case ActKind::kGeluNew:
      return run<ActKind::kGeluNew>(pool, gate, up, out);
    case ActKind::kQuickGelu:
      return run<ActKind::kQuickGelu>(pool, gate, up, out);
    case ActKind::kRelu:
      return run<ActKind::kRelu>(pool, gate, up, out);
  }
  TF_CHECK(false && "unknown ActKind");
}

}  // namespace

void act_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) {
  TF_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel());
  TF_CHECK(gate.dtype == up.dtype && out.dtype == gate.dtype && is_float_act(gate.dtype));
  dispatch(pool, gate, &up, kind, out);
}

void act(ThreadPool& pool, const Tensor& x, ActKind kind, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  dispatch(pool, x, nullptr, kind, out);
}

// glu: act_mul over the two column halves of the fused gate_up output, on contiguous copies.
void glu(ThreadPool& pool, const Tensor& gu, ActKind kind, const Tensor& out) {
  TF_CHECK(gu.rank() == 2 && gu.dim(1) % 2 == 0 && out.rank() == 2 && out.dim(0) == gu.dim(0) &&
           out.dim(1) * 2 == gu.dim(1) && out.dtype == gu.dtype && is_float_act(gu.dtype));
  const int64_t n = out.dim(0), d = out.dim(1);
  const size_t rb = static_cast<size_t>(d) * dtype_size(gu.dtype);
  Buffer gate(gu.dtype, {n, d}), up(gu.dtype, {n, d});
  for (int64_t i = 0; i < n; ++i) {
    const char* row = static_cast<const char*>(gu.data) + 2 * rb * i;
    std::memcpy(static_cast<char*>(gate.data()) + rb * i, row, rb);
    std::memcpy(static_cast<char*>(up.data()) + rb * i, row + rb, rb);
  }
  const Tensor u = up.view();
  dispatch(pool, gate, &u, kind, out);
}

}  // namespace tf::cpu
