// The rows of one step (Model::forward_step) as every family sees them: the segments' rows concatenated
// in segment order into one matrix, with each segment's place in it, and the checks every family makes
// on a segment before anything runs (so an error changes no cache).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "models/model.h"

namespace tf {

struct StepRows {
  std::vector<int32_t> token_ids;   // [n_rows]
  std::vector<int32_t> positions;   // [n_rows]
  std::vector<int32_t> image_rows;  // step rows of image tokens, in order (segment s's take its image_embeds)
  std::vector<int32_t>
      logit_rows;                 // step rows that need logits: segments in order, each in its batch's order
  std::vector<int64_t> off;       // [n_segments + 1]: segment s holds step rows [off[s], off[s + 1])
  std::vector<SampleRow> sample;  // [logit_rows.size()]: each logit row's sampling (greedy where not given)

  int64_t n_rows() const { return off.empty() ? 0 : off.back(); }
  size_t n_segments() const { return off.empty() ? 0 : off.size() - 1; }
  int64_t begin(size_t s) const { return off[s]; }
  int64_t end(size_t s) const { return off[s + 1]; }
  // [n_rows, 2] key ranges (Backend::attention): row i attends to its own cache's slots [0, positions[i]].
  std::vector<int32_t> causal_ranges() const;
  // inputs_embeds.masked_scatter(image mask, features), per segment: writes segs[s].batch->image_embeds
  // into segment s's image rows of h [n_rows, hidden].
  void scatter_images(Backend& b, std::span<const Segment> segs, const Tensor& h) const;
};

struct StepLimits {
  int64_t vocab_size = 0;
  int64_t image_token_id = -1;  // -1: no row is an image row (a text-only checkpoint)
  int64_t hidden_size = 0;      // width of image embedding rows
  DType act = DType::BF16;      // their dtype
};

// Checks every segment and concatenates their rows. A segment needs a batch and a cache (each cache at
// most once per step), at least one row, one position per token, ids in the vocabulary, positions in
// [0, capacity), exactly one image embedding row ([n, hidden] act) per image token, and logit rows inside
// its batch. Family rules (Qwen3.5's positions continuing the cache, ...) are the caller's.
Expected<StepRows> collect_step_rows(std::span<const Segment> segs, const StepLimits& lim);

}  // namespace tf
