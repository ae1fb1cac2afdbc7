// The engine's prompt-cache side (runtime/prefix_cache.h): resuming an admitted sequence from the
// longest cached block-aligned prefix (engine_vision.cpp then encodes only the images that still have
// rows after it, reusing cached vision-encoder outputs), and caching a sequence's prompt blocks as its
// prefill computes them. Resumed rows are copies of rows a fresh prefill computes bit for bit (chunk
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
