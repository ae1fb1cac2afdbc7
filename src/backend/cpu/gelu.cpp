// gelu: erf (nn.GELU()) or tanh approximation, f32 math, one rounding.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void gelu(ThreadPool& pool, const Tensor& x, GeluKind kind, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  constexpr int64_t kChunk = 4096;
  const int64_t n = x.numel(), n_chunks = (n + kChunk - 1) / kChunk;
  const float kSqrt1_2 = 0.70710678118654752440f;
  const float kBeta = 0.7978845608028654f;  // sqrt(2/pi)
  pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> a(kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
      load_f32_row(x, off, len, a.data());
      for (int64_t i = 0; i < len; ++i) {
        const float v = a[i];
        if (kind == GeluKind::kErf) {
          a[i] = v * 0.5f * (1.0f + fm::erf(v * kSqrt1_2));
        } else {
          const float inner = kBeta * (v + 0.044715f * v * v * v);
          a[i] = 0.5f * v * (1.0f + fm::tanh(inner));
        }
      }
      store_f32_row(out, off, len, a.data());
    }
  });
}

}  // namespace tf::cpu
