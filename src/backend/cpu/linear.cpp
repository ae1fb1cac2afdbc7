// linear: out = x · w^T (+ bias), f32 accumulation in dot_f32's fixed order, one rounding.
#include <algorithm>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && out.rank() == 2);
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  TF_CHECK(w.dim(1) == in_f && out.dim(0) == n && out.dim(1) == out_f);
  TF_CHECK(is_float_act(x.dtype) && is_float_act(w.dtype) && is_float_act(out.dtype));
  if (bias) TF_CHECK(bias->numel() == out_f && is_float_act(bias->dtype));
  if (n == 0 || out_f == 0) return;

  // x as f32 once ([n, in_f]); bf16 -> f32 is exact.
  std::vector<float> xf(static_cast<size_t>(n * in_f));
  load_f32_row(x, 0, n * in_f, xf.data());
  std::vector<float> bf;
  if (bias) {
    bf.resize(static_cast<size_t>(out_f));
    load_f32_row(*bias, 0, out_f, bf.data());
  }
  const bool w_bf16 = w.dtype == DType::BF16;
  const bool o_bf16 = out.dtype == DType::BF16;
  constexpr int64_t kRowBlock = 32;  // cache tiling only: each element's arithmetic is unchanged
  constexpr int64_t kColBlock = 16;
  const int64_t n_col_blocks = (out_f + kColBlock - 1) / kColBlock;
  pool.parallel_for(n_col_blocks, [&](int64_t cb0, int64_t cb1) {
    const int64_t j0 = cb0 * kColBlock, j1 = std::min(out_f, cb1 * kColBlock);
    for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
      const int64_t i1 = std::min(n, i0 + kRowBlock);
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* xr = xf.data() + i * in_f;
          float acc = w_bf16 ? dot_f32_bf16(xr, w.as<const uint16_t>() + j * in_f, in_f)
                             : dot_f32(xr, w.as<const float>() + j * in_f, in_f);
          if (bias) acc += bf[static_cast<size_t>(j)];
          if (o_bf16)
            out.as<uint16_t>()[i * out_f + j] = f32_to_bf16(acc);
          else
            out.as<float>()[i * out_f + j] = acc;
        }
      }
    }
  });
}

}  // namespace tf::cpu
