// The vision phase of a step (runtime/engine.h): the images of every sequence that starts its prompt
// in this step are encoded in ONE encoder call. Each image attends only to itself (block-diagonal
// attention, per-image RoPE and merge) and every other op is row-wise, so an image's rows are the
// rows a solo encode gives, bit for bit, whatever else shares the call (tests/unit/runtime/
// vision_batch_test.cpp; on CUDA the contract's "vision rows next to other images" check). Images
// the vision cache holds are reused; an image two sequences of the step share is encoded once.
#include <unordered_map>

#include "base/log.h"
#include "runtime/engine_sequence.h"

namespace tf {

namespace {

// One sequence's images that have rows at or after its resume point.
struct ImagePlan {
  size_t first = 0;        // the first such image (images before it are all in the prompt cache)
  int64_t rows_done = 0;   // rows of image `first` before the resume point
  int64_t total_rows = 0;  // Σ n_tokens of images first..
  std::vector<const DeviceBuffer*> cached;  // per image: the vision cache's rows, or null
  std::vector<int64_t> fresh_at;            // per image: its first row in the call's output, or -1
};

}  // namespace

void Engine::run_vision(const std::vector<Sequence*>& seqs, std::vector<bool>& ok) {
  ok.assign(seqs.size(), true);
  Model& m = pipe_->model();
  Backend& b = m.backend();
  const int64_t image_token = m.info().image_token_id;
  auto fail = [&](size_t i, const std::string& message) {
    Sequence& s = *seqs[i];
    if (s.req.cancelled->load()) {
      finish(s, "client-left");
    } else {
      s.channel->push(error_event(400, message));
      finish(s, "error");
    }
    ok[i] = false;
  };

  // Plan every sequence: which images it needs, which the cache has, which the call encodes.
  std::vector<ImagePlan> plans(seqs.size());
  std::vector<ImageInput> inputs;                     // the call's images, in order
  std::vector<const ProcessedImage*> input_images;    // the prompt image of each input
  std::unordered_map<std::string, int64_t> fresh_of;  // identity → first row in the call's output
  int64_t fresh_rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Prompt& p = seqs[i]->prompt;
    if (seqs[i]->req.cancelled->load()) {
      fail(i, "the client left during vision encoding");
      continue;
    }
    ImagePlan& pl = plans[i];
    int64_t rows_before = 0;  // image rows at positions < the resume point
    for (int64_t k = 0; k < seqs[i]->n_cached; ++k)
      rows_before += p.ids[static_cast<size_t>(k)] == image_token;
    int64_t skipped = 0;
    while (pl.first < p.images.size() && skipped + p.images[pl.first].n_tokens <= rows_before)
      skipped += p.images[pl.first++].n_tokens;
    pl.rows_done = rows_before - skipped;
    pl.cached.assign(p.images.size(), nullptr);
    pl.fresh_at.assign(p.images.size(), -1);
    for (size_t k = pl.first; k < p.images.size(); ++k) {
      const ProcessedImage& im = p.images[k];
      pl.total_rows += im.n_tokens;
      if (cache_) pl.cached[k] = cache_->find_image(im.identity);
      metrics_.vision_cache_lookup(pl.cached[k] != nullptr);
      if (pl.cached[k]) continue;
      if (auto it = fresh_of.find(im.identity); !im.identity.empty() && it != fresh_of.end()) {
        pl.fresh_at[k] = it->second;  // the same pixels and settings earlier in this call
        continue;
      }
      pl.fresh_at[k] = fresh_rows;
      if (!im.identity.empty()) fresh_of.emplace(im.identity, fresh_rows);
      fresh_rows += im.n_tokens;
      inputs.push_back(im.as_input());
      input_images.push_back(&im);
    }
  }

  // One call over all images; if it is refused (an image the tower cannot take), each sequence's
  // images run alone so only the sequences with a bad image fail.
  DeviceBuffer fresh;
  if (!inputs.empty()) {
    Expected<DeviceBuffer> all = m.encode_images(inputs);
    if (all.ok() && all->tensor().dim(0) != fresh_rows)
      all = make_error("the vision encoder returned " + std::to_string(all->tensor().dim(0)) + " rows for " +
                       std::to_string(fresh_rows) + " image tokens");
    if (!all.ok()) {
      if (seqs.size() > 1) {
        log_warn("vision encode of " + std::to_string(inputs.size()) + " images refused (" +
                 all.error().message + "); encoding each sequence's images alone");
        for (size_t i = 0; i < seqs.size(); ++i) {
          if (!ok[i]) continue;
          std::vector<bool> one_ok;
          run_vision({seqs[i]}, one_ok);
          ok[i] = one_ok[0];
        }
        return;
      }
      fail(0, all.error().message);
      return;
    }
    fresh = std::move(all).value();
    metrics_.vision_encode(static_cast<int64_t>(inputs.size()));
  }

  // Each sequence's rows [Σ n_tokens of its images first.., hidden]: cached rows and the call's rows.
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!ok[i]) continue;
    Sequence& s = *seqs[i];
    const ImagePlan& pl = plans[i];
    const Prompt& p = s.prompt;
    s.image_rows_done = pl.rows_done;
    s.phase = Sequence::Phase::Prefill;
    if (pl.first == p.images.size()) continue;  // every image row is in the restored prefix
    const bool whole_call = seqs.size() == 1 && pl.first == 0 && fresh_rows == pl.total_rows &&
                            inputs.size() == p.images.size() && !cache_;
    if (whole_call) {  // the call's output is exactly this sequence's rows
      s.image_embeds = std::move(fresh);
      continue;
    }
    const Tensor& any = !fresh.empty() ? fresh.tensor() : pl.cached[pl.first]->tensor();
    s.image_embeds = b.alloc(any.dtype, {pl.total_rows, any.dim(1)});
    int64_t row = 0;
    for (size_t k = pl.first; k < p.images.size(); ++k) {
      const int64_t nt = p.images[k].n_tokens;
      const Tensor dst = s.image_embeds.tensor().slice_rows(row, row + nt);
      if (pl.cached[k]) {
        b.copy(pl.cached[k]->tensor(), dst);
      } else {
        b.copy(fresh.tensor().slice_rows(pl.fresh_at[k], pl.fresh_at[k] + nt), dst);
      }
      row += nt;
    }
  }
  // Into the vision cache only after every copy: an insert may evict an entry copied above.
  if (cache_ && !fresh.empty()) {
    int64_t row = 0;
    for (const ProcessedImage* im : input_images) {
      const int64_t nt = im->n_tokens;
      DeviceBuffer own = b.alloc(fresh.tensor().dtype, {nt, fresh.tensor().dim(1)});
      b.copy(fresh.tensor().slice_rows(row, row + nt), own);
      cache_->insert_image(im->identity, std::move(own));
      row += nt;
    }
    metrics_.set_prompt_cache(static_cast<int64_t>(cache_->bytes()), static_cast<int64_t>(cache_->n_blocks()),
                              cache_->n_evicted());
  }
}

}  // namespace tf
