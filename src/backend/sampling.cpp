#include "backend/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/cpu/fmath.h"
#include "base/rng.h"

namespace tf::sampling {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

void filtered(std::span<const float> logits, float temperature, int32_t top_k, float top_p,
              std::vector<int32_t>* ids, std::vector<float>* probs) {
  const size_t n = logits.size();
  // TemperatureLogitsWarper: scores / temperature, in f32.
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = logits[i] / temperature;
  std::vector<bool> keep(n, true);
  // TopKLogitsWarper: remove scores strictly below the k-th largest (ties at the k-th survive).
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<float> tmp(s);
    std::nth_element(tmp.begin(), tmp.begin() + (top_k - 1), tmp.end(), std::greater<float>());
    float kth = tmp[static_cast<size_t>(top_k - 1)];
    for (size_t i = 0; i < n; ++i)
      if (s[i] < kth) keep[i] = false;
  }
  // TopPLogitsWarper: sort ascending (stable), softmax, cumulative sum; drop tokens whose
  // cumulative probability is <= 1 - top_p, always keeping the largest.
  // Tokens whose exp(s - max) is exactly 0 (at temperature 0.2: logits more than ~20.8 below the top) lead
  // the ascending order, add +0 to the sum and to cum (which stays 0 <= 1 - top_p), so each is dropped
  // wherever it sits among them: only the others are sorted. The same order of the others, the same sums
  // and the same kept set as sorting them all (SamplingFiltered); each exp is computed once.
  if (top_p < 1.0f) {
    float mx = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) mx = std::max(mx, s[i]), nan = nan || std::isnan(s[i]);
    std::vector<int32_t> order;
    // exp(s_i - max) (x - (+0) and x - (-0) are equal, so the max's zero sign is moot)
    std::vector<float> ei(n);
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) {
        ei[i] = fm::exp(s[i] - mx);
        if (ei[i] == 0.0f && !nan)
          keep[i] = false;
        else
          order.push_back(static_cast<int32_t>(i));
      }
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] < s[b]; });
    if (nan)  // the sort's last as the max, as Transformers' order gives it
      for (int32_t i : order) ei[static_cast<size_t>(i)] = fm::exp(s[i] - s[order.back()]);
    float sum = 0.0f;
    for (int32_t i : order) sum += ei[static_cast<size_t>(i)];
    float cum = 0.0f;
    for (size_t j = 0; j + 1 < order.size(); ++j) {
      cum += ei[static_cast<size_t>(order[j])] / sum;
      if (cum <= 1.0f - top_p) keep[order[j]] = false;
    }
  }
  ids->clear();
  probs->clear();
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    float e = fm::exp(s[i] - mx);
    ids->push_back(static_cast<int32_t>(i));
    probs->push_back(e);
    sum += e;
  }
  for (float& v : *probs) v /= sum;
}

int32_t draw(std::span<const float> logits, const SampleRow& p) {
  if (p.temperature <= 0.0f) return argmax(logits);
  std::vector<int32_t> ids;
  std::vector<float> probs;
  filtered(logits, p.temperature, p.top_k, p.top_p, &ids, &probs);
  double u = uniform_at(p.seed, p.position);
  double cum = 0.0;
  for (size_t j = 0; j < ids.size(); ++j) {
    cum += probs[j];
    if (u < cum) return ids[j];
  }
  return ids.back();  // u beyond the rounded total
}

float logprobs(std::span<const float> logits, int32_t token, int32_t n_top, int32_t* top_ids,
               float* top_logprobs) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  if (n_top > 0) {
    std::vector<int32_t> idx(logits.size());
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(idx.size(), static_cast<size_t>(n_top));
    std::partial_sort(
        idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
        [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (size_t i = 0; i < k; ++i) {
      top_ids[i] = idx[i];
      top_logprobs[i] = logits[idx[i]] - lse;
    }
  }
  return logits[token] - lse;
}

}  // namespace tf::sampling
