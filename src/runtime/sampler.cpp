#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "runtime/rng.h"

namespace tf {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

float top2_margin(std::span<const float> logits) {
  float a = -std::numeric_limits<float>::infinity(), b = a;
  for (float v : logits) {
    if (v > a) {
      b = a;
      a = v;
    } else if (v > b) {
      b = v;
    }
  }
  return a - b;
}

Candidates filtered_distribution(std::span<const float> logits, const SamplingParams& p) {
  const size_t n = logits.size();
  // TemperatureLogitsWarper: scores / temperature, in f32.
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = logits[i] / p.temperature;
  std::vector<bool> keep(n, true);
  // TopKLogitsWarper: remove scores strictly below the k-th largest (ties at the k-th survive).
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::vector<float> tmp(s);
    std::nth_element(tmp.begin(), tmp.begin() + (p.top_k - 1), tmp.end(), std::greater<float>());
    float kth = tmp[p.top_k - 1];
    for (size_t i = 0; i < n; ++i)
      if (s[i] < kth) keep[i] = false;
  }
  // TopPLogitsWarper: sort ascending (stable), softmax, cumulative sum; drop tokens whose
  // cumulative probability is <= 1 - top_p, always keeping the largest.
  if (p.top_p < 1.0f) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) order.push_back(static_cast<int32_t>(i));
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] < s[b]; });
    float mx = s[order.back()];
    std::vector<float> e(order.size());
    float sum = 0.0f;
    for (size_t j = 0; j < order.size(); ++j) sum += (e[j] = std::exp(s[order[j]] - mx));
    float cum = 0.0f;
    for (size_t j = 0; j + 1 < order.size(); ++j) {
      cum += e[j] / sum;
      if (cum <= 1.0f - p.top_p) keep[order[j]] = false;
    }
  }
  Candidates c;
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    float e = std::exp(s[i] - mx);
    c.ids.push_back(static_cast<int32_t>(i));
    c.probs.push_back(e);
    sum += e;
  }
  for (float& v : c.probs) v /= sum;
  return c;
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t position) {
  if (p.temperature <= 0.0f) return argmax(logits);
  Candidates c = filtered_distribution(logits, p);
  double u = uniform_at(p.seed, position);
  double cum = 0.0;
  for (size_t j = 0; j < c.ids.size(); ++j) {
    cum += c.probs[j];
    if (u < cum) return c.ids[j];
  }
  return c.ids.back();  // u beyond the rounded total
}
}  // namespace tf
