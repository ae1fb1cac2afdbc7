// layer_norm: f32 statistics (two passes, fixed order), f32 affine, one rounding.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                const Tensor& out) {
  TF_CHECK(x.rank() >= 1 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t d = x.dim(-1), n = d ? x.numel() / d : 0;
  TF_CHECK(w.numel() == d && b.numel() == d && is_float_act(w.dtype) && is_float_act(b.dtype));
  std::vector<float> wf(static_cast<size_t>(d)), bf(static_cast<size_t>(d));
  load_f32_row(w, 0, d, wf.data());
  load_f32_row(b, 0, d, bf.data());
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(d)), cen(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1; ++r) {
      load_f32_row(x, r * d, d, row.data());
      const float mean = sum_f32(row.data(), d) / static_cast<float>(d);
      for (int64_t i = 0; i < d; ++i) cen[i] = row[i] - mean;
      const float var = sum_sq(cen.data(), d) / static_cast<float>(d);
      const float rstd = 1.0f / std::sqrt(var + eps);
      for (int64_t i = 0; i < d; ++i) row[i] = cen[i] * rstd * wf[i] + bf[i];
      store_f32_row(out, r * d, d, row.data());
    }
  });
}

}  // namespace tf::cpu
