// rms_norm_gated: Qwen3_5RMSNormGated, norm rounded, weight multiply in act, f32 SiLU gate.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void rms_norm_gated(ThreadPool& pool, const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                    const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && gate.numel() == x.numel() && out.numel() == x.numel());
  TF_CHECK(is_float_act(x.dtype) && gate.dtype == x.dtype && out.dtype == x.dtype && w.dtype == x.dtype);
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d);
  const DType act = x.dtype;
  std::vector<float> wf(static_cast<size_t>(d));
  load_f32_row(w, 0, d, wf.data());
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(d)), z(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      load_f32_row(x, r * d, d, row.data());
      load_f32_row(gate, r * d, d, z.data());
      const float inv = 1.0f / std::sqrt(sum_sq(row.data(), d) / static_cast<float>(d) + eps);
      for (int64_t i = 0; i < d; ++i) {
        const float y = rnd(wf[i] * rnd(row[i] * inv, act), act);
        row[i] = rnd(y * (z[i] / (1.0f + fm::exp(-z[i]))), act);
      }
      store_f32_row(out, r * d, d, row.data());
    }
  });
}

}  // namespace tf::cpu
