// rms_norm: HF LlamaRMSNorm-style (two bf16 roundings) or Qwen3.5's (1 + w) variant (one rounding).
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, RmsNormKind kind,
              const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d && is_float_act(w.dtype));
  if (kind == RmsNormKind::kWeight) TF_CHECK(w.dtype == x.dtype);
  const DType act = x.dtype;
  std::vector<float> wf(static_cast<size_t>(d));
  load_f32_row(w, 0, d, wf.data());
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      load_f32_row(x, r * d, d, row.data());
      const float var = sum_sq(row.data(), d) / static_cast<float>(d);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (int64_t i = 0; i < d; ++i) {
        if (kind == RmsNormKind::kWeight) {
          row[i] = rnd(wf[i] * rnd(row[i] * inv, act), act);
        } else {
          row[i] = rnd(row[i] * inv * (1.0f + wf[i]), act);
        }
      }
      store_f32_row(out, r * d, d, row.data());
    }
  });
}

// add_rms_norm: `add` in place, then `rms_norm` (the CPU reference is the two ops in turn).
void add_rms_norm(ThreadPool& pool, const Tensor& h, const Tensor& delta, const Tensor& w, float eps,
                  RmsNormKind kind, const Tensor& out) {
  TF_CHECK(h.shape == delta.shape && h.dtype == delta.dtype && out.numel() == h.numel());
  TF_CHECK(out.data != h.data && out.data != delta.data);
  add(pool, h, delta, h);
  rms_norm(pool, h, w, eps, kind, out);
}

}  // namespace tf::cpu
