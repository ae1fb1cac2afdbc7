// sigmoid_mul: x * sigmoid(gate) with the sigmoid materialised in act (gated attention output).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void sigmoid_mul(ThreadPool& pool, const Tensor& x, const Tensor& gate, const Tensor& out) {
  TF_CHECK(gate.numel() == x.numel() && out.numel() == x.numel());
  TF_CHECK(is_float_act(x.dtype) && gate.dtype == x.dtype && out.dtype == x.dtype);
  const DType act = x.dtype;
  constexpr int64_t kChunk = 4096;
  const int64_t n = x.numel(), n_chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> a(kChunk), z(kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
      load_f32_row(x, off, len, a.data());
      load_f32_row(gate, off, len, z.data());
      for (int64_t i = 0; i < len; ++i) a[i] = rnd(a[i] * rnd(1.0f / (1.0f + fm::exp(-z[i])), act), act);
      store_f32_row(out, off, len, a.data());
    }
  });
}

}  // namespace tf::cpu
