#include "runtime/sampler.h"

#include <limits>

#include "backend/sampling.h"

namespace tf {

int32_t argmax(std::span<const float> logits) { return sampling::argmax(logits); }

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
  Candidates c;
  sampling::filtered(logits, p.temperature, p.top_k, p.top_p, &c.ids, &c.probs);
  return c;
}

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t position) {
  return sampling::draw(logits, sample_row(p, position));
}

SampleRow sample_row(const SamplingParams& p, uint64_t position, int32_t n_logprobs) {
  SampleRow r;
  r.temperature = p.temperature;
  r.top_p = p.top_p;
  r.top_k = p.top_k;
  r.n_logprobs = n_logprobs;
  r.seed = p.seed;
  r.position = position;
  return r;
}
}  // namespace tf
