// The engine's prompt-cache side (runtime/prefix_cache.h): resuming an admitted sequence from the
// longest cached block-aligned prefix (engine_vision.cpp then encodes only the images that still have
// rows after it, reusing cached vision-encoder outputs), and caching a sequence's prompt blocks as its
// prefill computes them. Resumed rows are copies of rows a fresh prefill computes bit for bit (chunk
// boundaries stay on multiples of 64 from position 0), so output never depends on the cache.
// Hybrid families' snapshots are slots of the model's state pool (models/layers/state_pool.h): a
// sequence takes its own slot before anything (cached blocks give theirs up for it), and a block is
// cached only when a slot is free or an older cached block gives one up; otherwise it is not cached.
#include "base/log.h"
#include "runtime/engine.h"

namespace tf {

int64_t Engine::resume_from_cache(const Prompt& p, SequenceCache& cache, std::vector<std::string>& keys) {
  keys.clear();
  if (!cache_) return 0;
  keys = prompt_block_keys(p.ids, pipe_->info().image_token_id, p.images);
  // The last prompt token is always computed: its logits start the output.
  const size_t max_blocks = (p.ids.size() - 1) / static_cast<size_t>(PrefixCache::kBlock);
  // The sequence's own state slot first (restore copies a snapshot into it): running sequences come
  // before snapshots. Without one it starts from position 0 and waits for a slot like any other.
  Model& m = pipe_->model();
  while (!m.reserve(cache, 0))
    if (!cache_->evict_lru_state()) {
      metrics_.prompt_cache_lookup(false);
      return 0;
    }
  std::vector<const CacheBlock*> chain = cache_->match(keys, max_blocks);
  int64_t n_cached = 0;
  if (!chain.empty()) {
    if (Status st = m.restore(cache, chain); st.ok()) {
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
  const Model::KvPoolStats ps = pipe_->model().kv_pool_stats();
  metrics_.set_state_slots(ps.state_slots, ps.state_slots_free,
                           static_cast<int64_t>(cache_->n_state_slots()));
}

void Engine::cache_prompt_blocks_into(const std::vector<std::string>& keys, SequenceCache& cache,
                                      int64_t begin, int64_t end) {
  const int64_t B = PrefixCache::kBlock;
  for (int64_t i = begin / B; (i + 1) * B <= end && i < static_cast<int64_t>(keys.size()); ++i) {
    if ((i + 1) * B <= begin) continue;
    if (!cache_->can_insert(keys, static_cast<size_t>(i))) continue;  // cached already, or no parent
    // A snapshot slot: a free one, or one an older cached block (not this one's parent) gives up.
    // None: the block is not cached, nor (without their parent) are the ones after it.
    for (;;) {
      const Model::KvPoolStats ps = pipe_->model().kv_pool_stats();
      if (ps.state_slots == 0 || ps.state_slots_free > 0) break;
      if (!cache_->evict_lru_state(keys, static_cast<size_t>(i))) return;
    }
    auto blk = pipe_->model().snapshot(cache, i * B, (i + 1) * B);
    if (!blk.ok()) {
      log_warn("prompt cache: " + blk.error().message);
      return;
    }
    if (!cache_->insert(keys, static_cast<size_t>(i), std::move(blk).value())) return;  // over budget
  }
}

}  // namespace tf
