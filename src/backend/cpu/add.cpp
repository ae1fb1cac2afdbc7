// add: rnd(a + b), the residual stream (bf16 + bf16 -> bf16 in HF).
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& out) {
  TF_CHECK(a.numel() == b.numel() && out.numel() == a.numel());
  TF_CHECK(a.dtype == b.dtype && out.dtype == a.dtype && is_float_act(a.dtype));
  constexpr int64_t kChunk = 4096;
  const int64_t n = a.numel(), n_chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> x(kChunk), y(kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t off = c * kChunk, len = std::min(kChunk, n - off);
      load_f32_row(a, off, len, x.data());
      load_f32_row(b, off, len, y.data());
      for (int64_t i = 0; i < len; ++i) x[i] += y[i];
      store_f32_row(out, off, len, x.data());
    }
  });
}

}  // namespace tf::cpu
