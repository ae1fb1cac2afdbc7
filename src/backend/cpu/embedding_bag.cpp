// embedding_bag: weighted sum of table rows in f32, one rounding (vision position resampling).
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) {
  TF_CHECK(table.rank() == 2 && idx.rank() == 2 && idx.dtype == DType::I32 && w.dtype == DType::F32);
  const int64_t V = table.dim(0), d = table.dim(1), n = idx.dim(0), taps = idx.dim(1);
  TF_CHECK(w.shape == idx.shape && out.rank() == 2 && out.dim(0) == n && out.dim(1) == d);
  TF_CHECK(is_float_act(table.dtype) && is_float_act(out.dtype));
  std::vector<float> row(static_cast<size_t>(d)), acc(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t r = idx.as<const int32_t>()[i * taps + t];
      TF_CHECK(r >= 0 && r < V);
      const float wt = w.as<const float>()[i * taps + t];
      load_f32_row(table, r * d, d, row.data());
      for (int64_t c = 0; c < d; ++c) {
        const float p = row[c] * wt;
        acc[c] = t == 0 ? p : acc[c] + p;
      }
    }
    if (taps == 0) std::fill(acc.begin(), acc.end(), 0.0f);
    store_f32_row(out, i * d, d, acc.data());
  }
}

}  // namespace tf::cpu
