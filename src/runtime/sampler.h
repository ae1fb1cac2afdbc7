// Token selection from one row of logits, with Transformers' logits-warper semantics
// (temperature, then top-k, then top-p) and draws from the counter-based RNG: backend/sampling.h's
// reference, which is also the CPU backend's sample op (Backend::sample runs it on the device).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tf {

struct SampleRow;  // backend/sampling.h

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0: off
  uint64_t seed = 0;
};

// Index of the largest logit; ties go to the lowest index (torch.argmax).
int32_t argmax(std::span<const float> logits);

// Top-2 margin of a row (largest minus second largest), used to explain greedy differences.
float top2_margin(std::span<const float> logits);

// Picks the token for output position `position` of a request. Greedy when temperature == 0.
int32_t sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t position);

// The filtered, renormalised distribution sample_token draws from (token ids ascending, probs).
// Exposed so draft verification can test acceptance against the same distribution.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};
Candidates filtered_distribution(std::span<const float> logits, const SamplingParams& params);

// The row parameters Backend::sample takes for output position `position` of a request (the device
// form of sample_token; n_logprobs as SampleRow states).
SampleRow sample_row(const SamplingParams& params, uint64_t position, int32_t n_logprobs = -1);

}  // namespace tf
