// sample: each row through the host reference (backend/sampling.h), rows in parallel; a row's result
// depends on nothing but its logits and parameters.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"
#include "backend/sampling.h"

namespace tf::cpu {

void sample(ThreadPool& pool, const Tensor& logits, const Tensor& params, const Tensor& out) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(params.dtype == DType::I32 && params.numel() == n * kSampleRowWords);
  TF_CHECK(out.dtype == DType::I32 && out.rank() == 2 && out.dim(0) == n && V > 0);
  const int64_t w = out.dim(1), m = (w - 2) / 2;  // [n, w]: w = 1, or 2 + 2m
  TF_CHECK(w == 1 || (w >= 2 && w % 2 == 0));
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> top_ids;
    std::vector<float> top_lp;
    for (int64_t r = r0; r < r1; ++r) {
      SampleRow p;
      std::memcpy(static_cast<void*>(&p), params.as<const int32_t>() + r * kSampleRowWords, sizeof p);
      const std::span<const float> row(logits.as<const float>() + r * V, static_cast<size_t>(V));
      int32_t* o = out.as<int32_t>() + r * w;
      std::fill(o, o + w, 0);
      o[0] = sampling::draw(row, p);
      if (w == 1 || p.n_logprobs < 0) continue;
      const int64_t k = std::min({static_cast<int64_t>(p.n_logprobs), m, V});
      top_ids.assign(static_cast<size_t>(k), 0);
      top_lp.assign(static_cast<size_t>(k), 0.0f);
      const float lp = sampling::logprobs(row, o[0], static_cast<int32_t>(k), top_ids.data(), top_lp.data());
      std::memcpy(o + 1, &lp, 4);
      for (int64_t j = 0; j < k; ++j) {
        o[2 + 2 * j] = top_ids[static_cast<size_t>(j)];
        std::memcpy(o + 3 + 2 * j, &top_lp[static_cast<size_t>(j)], 4);
      }
    }
  });
}

}  // namespace tf::cpu
