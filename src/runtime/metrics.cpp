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
  o << "# TYPE tensorfold_queue_depth gauge\ntensorfold_queue_depth " << queue_depth_.load() << "\n";
  o << "# TYPE tensorfold_active_sequences gauge\ntensorfold_active_sequences " << active_.load() << "\n";
  o << "# HELP tensorfold_step_seconds Engine step time.\n# TYPE tensorfold_step_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i)
    o << "tensorfold_step_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_counts_[i] << "\n";
  o << "tensorfold_step_seconds_bucket{le=\"+Inf\"} " << step_count_ << "\n";
  o << "tensorfold_step_seconds_sum " << step_sum_ << "\ntensorfold_step_seconds_count " << step_count_
    << "\n";
  return o.str();
}

}  // namespace tf
