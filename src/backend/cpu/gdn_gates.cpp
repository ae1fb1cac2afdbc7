// gdn_gates: Gated DeltaNet decay g (f32, log space) and write strength beta (act).
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta) {
  TF_CHECK(a.rank() == 2 && b.shape == a.shape && g.shape == a.shape && beta.shape == a.shape);
  const int64_t n = a.dim(0), h = a.dim(1);
  TF_CHECK(A_log.numel() == h && dt_bias.numel() == h && is_float_act(A_log.dtype) &&
           is_float_act(dt_bias.dtype));
  TF_CHECK(is_float_act(a.dtype) && b.dtype == a.dtype && beta.dtype == a.dtype && g.dtype == DType::F32);
  const DType act = a.dtype;
  std::vector<float> neg_a(static_cast<size_t>(h)), dt(static_cast<size_t>(h));
  load_f32_row(A_log, 0, h, neg_a.data());
  load_f32_row(dt_bias, 0, h, dt.data());
  for (auto& v : neg_a) v = -fm::exp(v);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < h; ++j) {
      const float x = load_f32(a, i * h + j) + dt[static_cast<size_t>(j)];
      const float sp = x > 20.0f ? x : fm::log1p(fm::exp(x));
      g.as<float>()[i * h + j] = neg_a[static_cast<size_t>(j)] * sp;
      const float bb = load_f32(b, i * h + j);
      store_f32(beta, i * h + j, rnd(1.0f / (1.0f + fm::exp(-bb)), act));
    }
}

}  // namespace tf::cpu
