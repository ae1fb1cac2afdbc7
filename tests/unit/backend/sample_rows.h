// Random logit rows and sampling parameters for the sample op's tests: the CPU op against the host
// sampler (tests/unit/runtime/sample_op_test.cpp) and the CUDA op against the CPU op
// (cuda_contract_sample_test.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/sampling.h"

namespace tf::samplerows {

// n rows of vocab logits into logits[n * vocab] and their parameters appended to *rows; returns the
// record width (1, or 2 + 2 * the largest n_logprobs). Rows of several shapes: normal logits at several
// scales, coarse values with many ties, a flat row, rows with -inf entries; parameters over greedy,
// temperatures, top-k (ties at the k-th included) and top-p, with and without logprobs. greedy_only:
// every temperature 0 (no draw from the generator for it, so the other values differ).
inline int64_t fill(int64_t vocab, int64_t n, uint32_t seed, bool greedy_only, float* logits,
                    std::vector<SampleRow>* rows) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float temps[] = {0.0f, 0.05f, 0.2f, 0.7f, 1.0f, 1.5f};
  const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.8f, 0.5f, 0.1f};
  const int32_t top_ks[] = {0, 0, 1, 2, 5, 50, static_cast<int32_t>(vocab), static_cast<int32_t>(vocab) + 3};
  const int32_t n_lps[] = {-1, -1, -1, 0, 3, 20};
  int32_t max_lp = -1;
  for (int64_t r = 0; r < n; ++r) {
    const int shape = static_cast<int>(rng() % 5);
    const float scale = 1.0f + static_cast<float>(rng() % 8);
    for (int64_t j = 0; j < vocab; ++j) {
      float v = nd(rng) * scale;
      if (shape == 1) v = std::round(v);                         // coarse: many equal logits
      if (shape == 2) v = 0.5f;                                  // flat
      if (shape == 3 && j > 0 && rng() % 7 == 0) v = -INFINITY;  // a row keeps a finite logit
      logits[r * vocab + j] = v;
    }
    SampleRow p;
    p.temperature = greedy_only ? 0.0f : temps[rng() % 6];
    p.top_p = top_ps[rng() % 6];
    p.top_k = top_ks[rng() % 8];
    p.n_logprobs = n_lps[rng() % 6];
    p.seed = (static_cast<uint64_t>(rng()) << 32) | rng();
    p.position = rng() % 5000;
    max_lp = std::max(max_lp, p.n_logprobs);
    rows->push_back(p);
  }
  return max_lp < 0 ? 1 : 2 + 2 * max_lp;
}

}  // namespace tf::samplerows
