// The engine's prompt-cache side (runtime/prefix_cache.h): resuming an admitted sequence from the
// longest cached block-aligned prefix, encoding only the images that still have rows after it
// (reusing cached vision-encoder outputs), and caching a sequence's prompt blocks as its prefill
// computes them. Resumed rows are copies of rows a fresh prefill computes bit for bit (chunk
// boundaries stay on multiples of 64 from position 0), so output never depends on the cache.
#include "base/log.h"
#include "runtime/engine.h"

namespace tf {

int64_t Engine::resume_from_cache(const Prompt& p, SequenceCache& cache, std::vector<std::string>& keys) {
  keys.clear();
  if (!cache_) return 0;
  keys = prompt_block_keys(p.ids, pipe_->info().image_token_id, p.images);
  // The last prompt token is always computed: its logits start the output.
  const size_t max_blocks = (p.ids.size() - 1) / static_cast<size_t>(PrefixCache::kBlock);
  std::vector<const CacheBlock*> chain = cache_->match(keys, max_blocks);
  int64_t n_cached = 0;
  if (!chain.empty()) {
    if (Status st = pipe_->model().restore(cache, chain); st.ok()) {
      n_cached = chain.back()->end;
    } else {
      log_warn("prompt cache: " + st.error().message + "; computing the prompt from the start");
    }
  }
  metrics_.prompt_cache_lookup(n_cached > 0);
  return n_cached;
}

Expected<DeviceBuffer> Engine::encode_images_from(const Prompt& p, int64_t resume_pos, int64_t& rows_done,
                                                  const std::atomic<bool>* cancelled) {
  Model& m = pipe_->model();
  const int64_t image_token = m.info().image_token_id;
  int64_t rows_before = 0;  // image rows at positions < resume_pos
  for (int64_t i = 0; i < resume_pos; ++i) rows_before += p.ids[static_cast<size_t>(i)] == image_token;
  size_t first = 0;  // the first image with rows at or after resume_pos
  int64_t skipped = 0;
  while (first < p.images.size() && skipped + p.images[first].n_tokens <= rows_before)
    skipped += p.images[first++].n_tokens;
  rows_done = rows_before - skipped;
  if (first == p.images.size()) return DeviceBuffer();

  std::vector<const DeviceBuffer*> cached(p.images.size(), nullptr);
  std::vector<size_t> missing;
  for (size_t k = first; k < p.images.size(); ++k) {
    if (cache_) cached[k] = cache_->find_image(p.images[k].identity);
    if (!cached[k]) missing.push_back(k);
    metrics_.vision_cache_lookup(cached[k] != nullptr);
  }
  // [Σ n_tokens of missing, hidden]. One image per encode_images call (each image attends only to
  // itself, so the rows are those of one call over all), checking for a client that left in between.
  DeviceBuffer fresh;
  {
    int64_t want = 0, row = 0;
    for (size_t k : missing) want += p.images[k].n_tokens;
    for (size_t k : missing) {
      if (cancelled && cancelled->load()) return make_error("the client left during vision encoding");
      TF_ASSIGN(DeviceBuffer one, m.encode_images({p.images[k].as_input()}));
      const int64_t nt = p.images[k].n_tokens;
      if (one.tensor().dim(0) != nt)
        return make_error("the vision encoder returned " + std::to_string(one.tensor().dim(0)) +
                          " rows for " + std::to_string(nt) + " image tokens");
      if (missing.size() == 1) {
        fresh = std::move(one);
        break;
      }
      if (fresh.empty()) fresh = m.backend().alloc(one.tensor().dtype, {want, one.tensor().dim(1)});
      m.backend().copy(one.tensor(), fresh.tensor().slice_rows(row, row + nt));
      row += nt;
    }
  }
  if (first == 0 && missing.size() == p.images.size() && !cache_) return fresh;

  Backend& b = m.backend();
  int64_t total = 0;
  for (size_t k = first; k < p.images.size(); ++k) total += p.images[k].n_tokens;
  const DType dt = !missing.empty() ? fresh.tensor().dtype : cached[first]->tensor().dtype;
  const int64_t hidden = !missing.empty() ? fresh.tensor().dim(1) : cached[first]->tensor().dim(1);
  if (!missing.empty()) {
    int64_t want = 0;
    for (size_t k : missing) want += p.images[k].n_tokens;
    if (fresh.tensor().dim(0) != want)
      return make_error("the vision encoder returned " + std::to_string(fresh.tensor().dim(0)) +
                        " rows for " + std::to_string(want) + " image tokens");
  }
  DeviceBuffer out = b.alloc(dt, {total, hidden});  // [Σ n_tokens of images first.., hidden]
  int64_t row = 0, fresh_row = 0;
  std::vector<std::pair<size_t, int64_t>> to_cache;  // (image, row in fresh)
  for (size_t k = first; k < p.images.size(); ++k) {
    const int64_t nt = p.images[k].n_tokens;
    if (cached[k]) {
      b.copy(*cached[k], out.tensor().slice_rows(row, row + nt));
    } else {
      b.copy(fresh.tensor().slice_rows(fresh_row, fresh_row + nt), out.tensor().slice_rows(row, row + nt));
      to_cache.emplace_back(k, fresh_row);
      fresh_row += nt;
    }
    row += nt;
  }
  // Insert only after every copy: an insert may evict an entry copied above.
  if (cache_) {
    for (auto [k, r] : to_cache) {
      const int64_t nt = p.images[k].n_tokens;
      DeviceBuffer own = b.alloc(dt, {nt, hidden});
      b.copy(fresh.tensor().slice_rows(r, r + nt), own);
      cache_->insert_image(p.images[k].identity, std::move(own));
    }
    metrics_.set_prompt_cache(static_cast<int64_t>(cache_->bytes()), static_cast<int64_t>(cache_->n_blocks()),
                              cache_->n_evicted());
  }
  return out;
}

void Engine::cache_prompt_blocks(const std::vector<std::string>& keys, SequenceCache& cache, int64_t begin,
                                 int64_t end) {
  if (!cache_) return;
  cache_prompt_blocks_into(keys, cache, begin, end);
  metrics_.set_prompt_cache(static_cast<int64_t>(cache_->bytes()), static_cast<int64_t>(cache_->n_blocks()),
                            cache_->n_evicted());
}

void Engine::cache_prompt_blocks_into(const std::vector<std::string>& keys, SequenceCache& cache,
                                      int64_t begin, int64_t end) {
  const int64_t B = PrefixCache::kBlock;
  for (int64_t i = begin / B; (i + 1) * B <= end && i < static_cast<int64_t>(keys.size()); ++i) {
    if ((i + 1) * B <= begin) continue;
    if (!cache_->can_insert(keys, static_cast<size_t>(i))) continue;  // cached already, or no parent
    auto blk = pipe_->model().snapshot(cache, i * B, (i + 1) * B);
    if (!blk.ok()) {
      log_warn("prompt cache: " + blk.error().message);
      return;
    }
    if (!cache_->insert(keys, static_cast<size_t>(i), std::move(blk).value())) return;  // over budget
  }
}

}  // namespace tf
