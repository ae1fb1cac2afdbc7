// causal_conv1d_silu: depthwise causal conv over [carried window | new tokens], conv output
// rounded, SiLU rounded (F.conv1d then ACT2FN["silu"] on act tensors), window carried forward.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void causal_conv1d_silu(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& state,
                        const Tensor& out) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && state.rank() == 2 && out.numel() == x.numel());
  const int64_t n = x.dim(0), C = x.dim(1), K = w.dim(1);
  TF_CHECK(K >= 1 && w.dim(0) == C && state.dim(0) == C && state.dim(1) == K - 1);
  TF_CHECK(is_float_act(x.dtype) && out.dtype == x.dtype && state.dtype == x.dtype && is_float_act(w.dtype));
  TF_CHECK(out.data != x.data);
  const DType act = x.dtype;
  if (n == 0) return;
  pool.parallel_for(C, [&](int64_t c0, int64_t c1) {
    std::vector<float> xx(static_cast<size_t>(K - 1 + n)), wf(static_cast<size_t>(K));
    for (int64_t c = c0; c < c1; ++c) {
      load_f32_row(w, c * K, K, wf.data());
      load_f32_row(state, c * (K - 1), K - 1, xx.data());
      for (int64_t t = 0; t < n; ++t) xx[static_cast<size_t>(K - 1 + t)] = load_f32(x, t * C + c);
      for (int64_t t = 0; t < n; ++t) {
        float acc = 0.0f;
        for (int64_t j = 0; j < K; ++j) acc += wf[static_cast<size_t>(j)] * xx[static_cast<size_t>(t + j)];
        const float y = rnd(acc, act);
        store_f32(out, t * C + c, rnd(y / (1.0f + fm::exp(-y)), act));
      }
      store_f32_row(state, c * (K - 1), K - 1, xx.data() + n);
    }
  });
}

}  // namespace tf::cpu
