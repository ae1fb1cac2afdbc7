#include "runtime/metrics.h"

#include <sstream>

namespace tf {

void EngineMetrics::finished(const std::string& reason, int64_t prompt, int64_t output, int64_t cached) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[reason]++;
  prompt_tokens_ += prompt;
  output_tokens_ += output;
  cached_tokens_ += cached;
}

void EngineMetrics::drafts(int64_t proposed, int64_t accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  draft_proposed_ += proposed;
  draft_accepted_ += accepted;
}

void EngineMetrics::prompt_cache_lookup(bool hit) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_lookups_++;
  cache_hits_ += hit;
}

void EngineMetrics::vision_cache_lookup(bool hit) {
  std::lock_guard<std::mutex> lock(mu_);
  image_lookups_++;
  image_hits_ += hit;
}

void EngineMetrics::vision_encode(int64_t images) {
  std::lock_guard<std::mutex> lock(mu_);
  vision_calls_++;
  vision_images_ += images;
}

void EngineMetrics::set_prompt_cache(int64_t bytes, int64_t blocks, int64_t evicted) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_bytes_ = bytes;
  cache_blocks_ = blocks;
  cache_evicted_ = evicted;
}

void EngineMetrics::step_rows(int64_t rows, int64_t sequences) {
  std::lock_guard<std::mutex> lock(mu_);
  forward_steps_++;
  step_rows_ += rows;
  step_sequences_ += sequences;
}

void EngineMetrics::step_seconds(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) bucket_counts_[i]++;
  step_count_++;
  step_sum_ += s;
}

std::string EngineMetrics::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  o << "# HELP tensorfold_requests_finished_total Requests finished, by reason.\n"
       "# TYPE tensorfold_requests_finished_total counter\n";
  for (const auto& [reason, n] : finished_)
    o << "tensorfold_requests_finished_total{reason=\"" << reason << "\"} " << n << "\n";
  o << "# TYPE tensorfold_prompt_tokens_total counter\ntensorfold_prompt_tokens_total " << prompt_tokens_
    << "\n";
  o << "# TYPE tensorfold_output_tokens_total counter\ntensorfold_output_tokens_total " << output_tokens_
    << "\n";
  o << "# TYPE tensorfold_cached_tokens_total counter\ntensorfold_cached_tokens_total " << cached_tokens_
    << "\n";
  o << "# HELP tensorfold_draft_tokens_proposed_total Draft tokens proposed for verification.\n"
       "# TYPE tensorfold_draft_tokens_proposed_total counter\ntensorfold_draft_tokens_proposed_total "
    << draft_proposed_ << "\n";
  o << "# HELP tensorfold_draft_tokens_accepted_total Draft tokens accepted (emitted as output).\n"
       "# TYPE tensorfold_draft_tokens_accepted_total counter\ntensorfold_draft_tokens_accepted_total "
    << draft_accepted_ << "\n";
  o << "# HELP tensorfold_prompt_cache_lookups_total Admitted requests looked up in the prompt cache.\n"
       "# TYPE tensorfold_prompt_cache_lookups_total counter\ntensorfold_prompt_cache_lookups_total "
    << cache_lookups_ << "\n";
  o << "# HELP tensorfold_prompt_cache_hits_total Requests that resumed from a cached prefix.\n"
       "# TYPE tensorfold_prompt_cache_hits_total counter\ntensorfold_prompt_cache_hits_total "
    << cache_hits_ << "\n";
  o << "# HELP tensorfold_vision_cache_lookups_total Images needed by a prefill (encoded or reused).\n"
       "# TYPE tensorfold_vision_cache_lookups_total counter\ntensorfold_vision_cache_lookups_total "
    << image_lookups_ << "\n";
  o << "# HELP tensorfold_vision_cache_hits_total Images whose encoder output came from the cache.\n"
       "# TYPE tensorfold_vision_cache_hits_total counter\ntensorfold_vision_cache_hits_total "
    << image_hits_ << "\n";
  o << "# HELP tensorfold_vision_encode_calls_total Vision-encoder calls (one per step that starts images).\n"
       "# TYPE tensorfold_vision_encode_calls_total counter\ntensorfold_vision_encode_calls_total "
    << vision_calls_ << "\n";
  o << "# HELP tensorfold_vision_images_encoded_total Images encoded (images per call = this / calls).\n"
       "# TYPE tensorfold_vision_images_encoded_total counter\ntensorfold_vision_images_encoded_total "
    << vision_images_ << "\n";
  o << "# TYPE tensorfold_prompt_cache_bytes gauge\ntensorfold_prompt_cache_bytes " << cache_bytes_ << "\n";
  o << "# TYPE tensorfold_prompt_cache_blocks gauge\ntensorfold_prompt_cache_blocks " << cache_blocks_
    << "\n";
  o << "# TYPE tensorfold_prompt_cache_evictions_total counter\ntensorfold_prompt_cache_evictions_total "
    << cache_evicted_ << "\n";
  o << "# HELP tensorfold_engine_failed 1 once the engine's device failed: it serves nothing more.\n"
       "# TYPE tensorfold_engine_failed gauge\ntensorfold_engine_failed "
    << failed_.load() << "\n";
  o << "# HELP tensorfold_engine_failed_requests_total Requests answered 503 because the engine's device "
       "failed.\n# TYPE tensorfold_engine_failed_requests_total counter\n"
       "tensorfold_engine_failed_requests_total "
    << failed_requests_.load() << "\n";
  o << "# TYPE tensorfold_queue_depth gauge\ntensorfold_queue_depth " << queue_depth_.load() << "\n";
  o << "# TYPE tensorfold_active_sequences gauge\ntensorfold_active_sequences " << active_.load() << "\n";
  o << "# HELP tensorfold_kv_blocks K/V pool blocks of " << 64
    << " positions.\n# TYPE tensorfold_kv_blocks gauge\n"
    << "tensorfold_kv_blocks{state=\"total\"} " << kv_total_.load() << "\n"
    << "tensorfold_kv_blocks{state=\"free\"} " << kv_free_.load() << "\n"
    << "tensorfold_kv_blocks{state=\"used\"} " << kv_total_.load() - kv_free_.load() << "\n"
    << "tensorfold_kv_blocks{state=\"prompt_cache\"} " << kv_cached_.load() << "\n";
  if (state_total_.load() > 0)
    o << "# HELP tensorfold_state_slots Recurrent-state slots (conv window and delta-rule state per "
         "linear layer): one per live sequence and one per prompt-cache snapshot.\n"
         "# TYPE tensorfold_state_slots gauge\n"
      << "tensorfold_state_slots{state=\"total\"} " << state_total_.load() << "\n"
      << "tensorfold_state_slots{state=\"free\"} " << state_free_.load() << "\n"
      << "tensorfold_state_slots{state=\"prompt_cache\"} " << state_snapshots_.load() << "\n";
  o << "# HELP tensorfold_preemptions_total Sequences preempted when the K/V pool ran out (recomputed "
       "later).\n"
       "# TYPE tensorfold_preemptions_total counter\ntensorfold_preemptions_total "
    << preemptions_.load() << "\n";
  o << "# HELP tensorfold_forward_steps_total Forward steps (one forward over every running sequence).\n"
       "# TYPE tensorfold_forward_steps_total counter\ntensorfold_forward_steps_total "
    << forward_steps_ << "\n";
  o << "# HELP tensorfold_step_rows_total Rows computed by forward steps (rows per step = this / steps).\n"
       "# TYPE tensorfold_step_rows_total counter\ntensorfold_step_rows_total "
    << step_rows_ << "\n";
  o << "# HELP tensorfold_step_sequences_total Sequences in forward steps, summed over steps.\n"
       "# TYPE tensorfold_step_sequences_total counter\ntensorfold_step_sequences_total "
    << step_sequences_ << "\n";
  o << "# HELP tensorfold_step_seconds Engine step time.\n# TYPE tensorfold_step_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i)
    o << "tensorfold_step_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_counts_[i] << "\n";
  o << "tensorfold_step_seconds_bucket{le=\"+Inf\"} " << step_count_ << "\n";
  o << "tensorfold_step_seconds_sum " << step_sum_ << "\ntensorfold_step_seconds_count " << step_count_
    << "\n";
  return o.str();
}

}  // namespace tf
