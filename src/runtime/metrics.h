// Engine counters for /metrics (Prometheus text exposition). Thread-safe.
#pragma once
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>

namespace tf {

class EngineMetrics {
 public:
  void finished(const std::string& reason, int64_t prompt, int64_t output, int64_t cached);
  void step_seconds(double s);
  // Rows and sequences of one forward step (the batch the weights were read for).
  void step_rows(int64_t rows, int64_t sequences);
  // Paged K/V pool: blocks in all, free, held by the prompt cache; preemptions.
  void set_kv_blocks(int64_t total, int64_t free, int64_t cached) {
    kv_total_ = total;
    kv_free_ = free;
    kv_cached_ = cached;
  }
  void preempted() { ++preemptions_; }
  // Recurrent-state slots (Qwen3.5's state pool): in all, free, and held by prompt-cache snapshots
  // (the rest by live sequences); not reported when total is 0.
  void set_state_slots(int64_t total, int64_t free, int64_t snapshots) {
    state_total_ = total;
    state_free_ = free;
    state_snapshots_ = snapshots;
  }
  // Draft tokens proposed and accepted (emitted) by a finished request.
  void drafts(int64_t proposed, int64_t accepted);
  // Prompt cache: one lookup per admitted request (hit: some prefix was restored), one per image
  // encoded or reused, and the cache's size after a change.
  void prompt_cache_lookup(bool hit);
  void vision_cache_lookup(bool hit);
  // One vision-encoder call over `images` images (the images of every sequence starting in a step).
  void vision_encode(int64_t images);
  void set_prompt_cache(int64_t bytes, int64_t blocks, int64_t evicted);
  void set_queue_depth(int64_t n) { queue_depth_ = n; }
  void set_active(int64_t n) { active_ = n; }
  // The engine's device failed (runtime/engine.h); a request answered 503 for it.
  void set_failed() { failed_ = 1; }
  void failed_request() { ++failed_requests_; }
  std::string text() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> finished_;
  int64_t prompt_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;
  int64_t draft_proposed_ = 0, draft_accepted_ = 0;
  int64_t cache_lookups_ = 0, cache_hits_ = 0, image_lookups_ = 0, image_hits_ = 0;
  int64_t vision_calls_ = 0, vision_images_ = 0;
  int64_t cache_bytes_ = 0, cache_blocks_ = 0, cache_evicted_ = 0;
  static constexpr std::array<double, 10> kBuckets{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  std::array<int64_t, kBuckets.size()> bucket_counts_{};
  int64_t step_count_ = 0, forward_steps_ = 0, step_rows_ = 0, step_sequences_ = 0;
  double step_sum_ = 0;
  std::atomic<int64_t> queue_depth_{0}, active_{0};
  std::atomic<int64_t> failed_{0}, failed_requests_{0};
  std::atomic<int64_t> kv_total_{0}, kv_free_{0}, kv_cached_{0}, preemptions_{0};
  std::atomic<int64_t> state_total_{0}, state_free_{0}, state_snapshots_{0};
};

}  // namespace tf
