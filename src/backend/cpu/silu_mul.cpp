// silu_mul: rnd(rnd(silu(gate)) * up), the gated MLP's two roundings.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void silu_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, const Tensor& out) {
  TF_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel());
  TF_CHECK(gate.dtype == up.dtype && out.dtype == gate.dtype && is_float_act(gate.dtype));
  const DType act = gate.dtype;
  constexpr int64_t kChunk = 4096;
  const int64_t n = gate.numel(), n_chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> g(kChunk), u(kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
      load_f32_row(gate, off, len, g.data());
      load_f32_row(up, off, len, u.data());
      for (int64_t i = 0; i < len; ++i) g[i] = rnd(rnd(g[i] / (1.0f + fm::exp(-g[i])), act) * u[i], act);
      store_f32_row(out, off, len, g.data());
    }
  });
}

}  // namespace tf::cpu
