// sampling::filtered sorts for top-p only the tokens whose exp(s - max) is not 0 (backend/sampling.cpp): the
// kept ids and their probabilities must be those of the whole stable sort (Transformers' TopPLogitsWarper
// order), bit for bit, here written out plainly as the reference. Logits with ties, -inf, wide and narrow
// spreads, with and without top-k. Control: the reference with an unstable sort order for ties (descending
// index) must differ somewhere, so the comparison sees the order of equal logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/fmath.h"
#include "backend/sampling.h"

namespace {

using tf::sampling::filtered;

void reference(const std::vector<float>& logits, float temperature, int32_t top_k, float top_p,
               std::vector<int32_t>* ids, std::vector<float>* probs, bool reversed_ties = false) {
  const size_t n = logits.size();
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = logits[i] / temperature;
  std::vector<bool> keep(n, true);
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<float> tmp(s);
    std::nth_element(tmp.begin(), tmp.begin() + (top_k - 1), tmp.end(), std::greater<float>());
    for (size_t i = 0; i < n; ++i)
      if (s[i] < tmp[static_cast<size_t>(top_k - 1)]) keep[i] = false;
  }
  if (top_p < 1.0f) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) order.push_back(static_cast<int32_t>(i));
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return s[a] < s[b] || (reversed_ties && s[a] == s[b] && a > b);
    });
    const float mx = s[order.back()];
    std::vector<float> e(order.size());
    float sum = 0.0f;
    for (size_t j = 0; j < order.size(); ++j) sum += (e[j] = tf::fm::exp(s[order[j]] - mx));
    float cum = 0.0f;
    for (size_t j = 0; j + 1 < order.size(); ++j) {
      cum += e[j] / sum;
      if (cum <= 1.0f - top_p) keep[order[j]] = false;
    }
  }
  ids->clear();
  probs->clear();
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) {
      const float e = tf::fm::exp(s[i] - mx);
      ids->push_back(static_cast<int32_t>(i));
      probs->push_back(e);
      sum += e;
    }
  for (float& v : *probs) v /= sum;
}

bool same(const std::vector<int32_t>& a, const std::vector<float>& pa, const std::vector<int32_t>& b,
          const std::vector<float>& pb) {
  return a == b && pa.size() == pb.size() &&
         std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)) == 0;
}

TEST(SamplingFiltered, TopPOverTheNonZeroTokensEqualsTheWholeSort) {
  std::mt19937 rng(2026);
  bool control_caught = false;
  int cases = 0, dropped_most = 0;
  for (int n : {7, 1400, 20000})
    for (float spread : {0.5f, 3.0f, 12.0f})
      for (float temperature : {0.2f, 1.0f})
        for (float top_p : {0.9f, 0.5f, 0.999f})
          for (int32_t top_k : {0, 50}) {
            std::normal_distribution<float> nd(0.0f, spread);
            std::vector<float> logits(static_cast<size_t>(n));
            for (float& v : logits) v = std::round(nd(rng) * 8.0f) / 8.0f;  // coarse: many ties
            logits[static_cast<size_t>(n / 3)] = -std::numeric_limits<float>::infinity();
            std::vector<int32_t> got, want, ctl;
            std::vector<float> pg, pw, pc;
            filtered(logits, temperature, top_k, top_p, &got, &pg);
            reference(logits, temperature, top_k, top_p, &want, &pw);
            EXPECT_TRUE(same(got, pg, want, pw)) << "n " << n << " spread " << spread << " T " << temperature
                                                 << " top_p " << top_p << " top_k " << top_k;
            reference(logits, temperature, top_k, top_p, &ctl, &pc, /*reversed_ties=*/true);
            control_caught = control_caught || !same(ctl, pc, want, pw);
            ++cases;
            // How often the zero-probability tokens were most of the vocabulary (what the change saves).
            int zeros = 0;
            const float mx = *std::max_element(logits.begin(), logits.end()) / temperature;
            for (float v : logits) zeros += tf::fm::exp(v / temperature - mx) == 0.0f;
            dropped_most += zeros > n / 2;
          }
  EXPECT_TRUE(control_caught) << "the order of tied logits went unseen";
  EXPECT_GT(dropped_most, 0) << "no case exercised the skipped sort";
  EXPECT_EQ(cases, 108);
}

}  // namespace
