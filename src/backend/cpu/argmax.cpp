// argmax and top_k over f32 logits; ties resolve to the lower index.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void argmax(ThreadPool& pool, const Tensor& logits, const Tensor& out) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32 && out.dtype == DType::I32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(out.numel() == n && V > 0);
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* l = logits.as<const float>() + r * V;
      int64_t best = 0;
      for (int64_t j = 1; j < V; ++j)
        if (l[j] > l[best]) best = j;
      out.as<int32_t>()[r] = static_cast<int32_t>(best);
    }
  });
}

void top_k(ThreadPool& pool, const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(k >= 1 && k <= V && values.numel() == n * k && indices.numel() == n * k);
  TF_CHECK(values.dtype == DType::F32 && indices.dtype == DType::I32);
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> idx(static_cast<size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      const float* l = logits.as<const float>() + r * V;
      std::iota(idx.begin(), idx.end(), 0);
      auto better = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
      for (int64_t j = 0; j < k; ++j) {
        indices.as<int32_t>()[r * k + j] = idx[static_cast<size_t>(j)];
        values.as<float>()[r * k + j] = l[idx[static_cast<size_t>(j)]];
      }
    }
  });
}

}  // namespace tf::cpu
