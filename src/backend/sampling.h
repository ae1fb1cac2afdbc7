// Token selection from a row of f32 logits, with Transformers' logits-warper semantics (temperature,
// then top-k, then top-p) and draws from the counter-based RNG (base/rng.h), and the logprobs a
// request can ask for. This is the host reference of Backend::sample (the CPU op runs it row by row)
// and the runtime's host sampler (runtime/sampler.h wraps it), so the CPU op IS the host sampler.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace tf {

// One logit row's sampling parameters, as Backend::sample reads them: 8 words per row of an I32
// tensor [n, kSampleRowWords] (the floats and the 64-bit halves by their bits, little-endian).
struct SampleRow {
  float temperature = 0.0f;  // <= 0: greedy (the first index of the maximum, torch.argmax)
  float top_p = 1.0f;        // (0, 1]; 1: off
  int32_t top_k = 0;         // <= 0 or >= vocab: off
  int32_t n_logprobs = -1;   // -1: none; 0: the chosen token's; n > 0: and the n most likely tokens'
  uint64_t seed = 0;
  uint64_t position = 0;  // the request's output position: the RNG counter of the draw
};
static_assert(sizeof(SampleRow) == 32);
inline constexpr int64_t kSampleRowWords = 8;

namespace sampling {

// Index of the largest logit; ties go to the lowest index (torch.argmax).
int32_t argmax(std::span<const float> logits);

// The filtered, renormalised distribution a draw is made from (token ids ascending, probs):
// s = logits / temperature (f32); TopK keeps s >= the k-th largest s (ties at the k-th survive);
// TopP sorts the survivors ascending (stable: equal s by index), takes e = exp(s - max) in f32,
// their f32 sum, and drops each but the largest whose f32 running sum of e / sum is <= 1 - top_p;
// the survivors' probs are exp(s - max) / their f32 sum in id order.
void filtered(std::span<const float> logits, float temperature, int32_t top_k, float top_p,
              std::vector<int32_t>* ids, std::vector<float>* probs);

// The token for one row: argmax when temperature <= 0, else the first id (ascending) of the filtered
// distribution whose running sum (in double) of probs exceeds u = uniform_at(seed, position); the last
// id if u is beyond the rounded total.
int32_t draw(std::span<const float> logits, const SampleRow& p);

// logprob(t) = logits[t] - lse, lse = max + log(Σ exp(double(v - max))) rounded to f32 (the raw logits:
// OpenAI's logprobs ignore the sampling warpers). Writes the n_top most likely tokens (logit
// descending, ties by lower index) and their logprobs; returns the logprob of `token`.
float logprobs(std::span<const float> logits, int32_t token, int32_t n_top, int32_t* top_ids,
               float* top_logprobs);

}  // namespace sampling
}  // namespace tf
