#include "models/layers/step_rows.h"

#include <string>

#include "models/layers/util.h"

namespace tf {

namespace {

// One segment's checks; its image tokens are counted into n_img.
Status check_segment(const Segment& sg, const StepLimits& lim, size_t& n_img) {
  if (!sg.batch || !sg.cache) return make_error("forward: a segment without batch or cache");
  const ForwardBatch& batch = *sg.batch;
  const int64_t n = static_cast<int64_t>(batch.token_ids.size()), cap = sg.cache->capacity();
  if (n == 0) return make_error("forward: empty batch");
  if (batch.positions.size() != batch.token_ids.size())
    return make_error("forward: " + std::to_string(batch.positions.size()) + " positions for " +
                      std::to_string(n) + " tokens");
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = batch.token_ids[static_cast<size_t>(i)], pos = batch.positions[static_cast<size_t>(i)];
    if (id < 0 || id >= lim.vocab_size)
      return make_error("forward: token id " + std::to_string(id) + " is outside the vocabulary");
    if (pos < 0 || pos >= cap)
      return make_error("forward: position " + std::to_string(pos) + " is outside the cache (capacity " +
                        std::to_string(cap) + ")");
    // Without image embeddings an image-token id is embedded as text: a generated one (HF's decode
    // steps pass no pixel_values, so masked_scatter never runs there).
    if (lim.image_token_id >= 0 && id == lim.image_token_id && batch.image_embeds) ++n_img;
  }
  const Tensor* emb = batch.image_embeds;
  const int64_t n_emb = emb ? emb->dim(0) : 0;
  if (n_emb != static_cast<int64_t>(n_img))
    return make_error("forward: " + std::to_string(n_img) + " image tokens but " + std::to_string(n_emb) +
                      " image embedding rows");
  if (emb && (emb->rank() != 2 || emb->dim(1) != lim.hidden_size || emb->dtype != lim.act))
    return make_error("forward: image embeddings must be " + std::string(dtype_name(lim.act)) + " [n, " +
                      std::to_string(lim.hidden_size) + "]");
  for (int32_t r : batch.logit_rows)
    if (r < 0 || r >= n)
      return make_error("forward: logit row " + std::to_string(r) + " is outside the batch");
  if (!batch.sample.empty() && batch.sample.size() != batch.logit_rows.size())
    return make_error("forward: " + std::to_string(batch.sample.size()) + " sampling rows for " +
                      std::to_string(batch.logit_rows.size()) + " logit rows");
  return {};
}

}  // namespace

Expected<StepRows> collect_step_rows(std::span<const Segment> segs, const StepLimits& lim) {
  if (segs.empty()) return make_error("forward: empty step");
  StepRows s;
  s.off.reserve(segs.size() + 1);
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& sg = segs[i];
    for (size_t j = 0; j < i; ++j)
      if (segs[j].cache == sg.cache) return make_error("forward: a step holds each sequence once");
    size_t n_img = 0;
    TF_TRY(check_segment(sg, lim, n_img));
    const ForwardBatch& batch = *sg.batch;
    const int64_t o = static_cast<int64_t>(s.token_ids.size()),
                  n = static_cast<int64_t>(batch.token_ids.size());
    s.off.push_back(o);
    if (n_img)
      for (int64_t r = 0; r < n; ++r)
        if (batch.token_ids[static_cast<size_t>(r)] == lim.image_token_id)
          s.image_rows.push_back(static_cast<int32_t>(o + r));
    s.token_ids.insert(s.token_ids.end(), batch.token_ids.begin(), batch.token_ids.end());
    s.positions.insert(s.positions.end(), batch.positions.begin(), batch.positions.end());
    for (int32_t r : batch.logit_rows) s.logit_rows.push_back(static_cast<int32_t>(o + r));
    if (batch.sample.empty())
      s.sample.resize(s.logit_rows.size());
    else
      s.sample.insert(s.sample.end(), batch.sample.begin(), batch.sample.end());
  }
  s.off.push_back(static_cast<int64_t>(s.token_ids.size()));
  return s;
}

std::vector<int32_t> StepRows::causal_ranges() const {
  std::vector<int32_t> r(2 * positions.size());  // [n_rows, 2]
  for (size_t i = 0; i < positions.size(); ++i) r[2 * i + 1] = positions[i] + 1;
  return r;
}

void StepRows::scatter_images(Backend& b, std::span<const Segment> segs, const Tensor& h) const {
  size_t k = 0;  // first image row of the segment
  for (const Segment& sg : segs) {
    const Tensor* emb = sg.batch->image_embeds;
    if (!emb || emb->dim(0) == 0) continue;
    const size_t m = static_cast<size_t>(emb->dim(0));
    const std::vector<int32_t> rows(image_rows.begin() + static_cast<std::ptrdiff_t>(k),
                                    image_rows.begin() + static_cast<std::ptrdiff_t>(k + m));
    b.scatter_rows(*emb, upload_i32(b, rows), h);
    k += m;
  }
}

}  // namespace tf
