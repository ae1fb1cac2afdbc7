// The engine: one thread owns the model; HTTP threads submit requests and read events from a
// per-request channel. Continuous batching over up to `parallel` sequences: every step gives each
// active sequence one unit of work (vision encode, one prefill chunk, or one decode token), so new
// requests start while others decode. A sequence's numbers never depend on what else is active
// (each forward is computed for its own rows; docs/design.md, invariant 2).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "image/image.h"
#include "runtime/drafts.h"
#include "runtime/engine_api.h"
#include "runtime/metrics.h"
#include "runtime/pipeline.h"
#include "runtime/prefix_cache.h"

namespace tf {

struct EngineOptions {
  std::string checkpoint;
  std::string backend = "cpu";
  bool require_vision = false;  // --vision: say so when the checkpoint has no tower
  int64_t context = 0;          // 0: the model's max_position_embeddings
  int parallel = 4;
  bool no_thinking = false;          // default chat_template_kwargs {"enable_thinking": false}
  std::string name;                  // served model name
  std::optional<float> temperature;  // serve-level default beating generation_config.json
  std::optional<int64_t> max_tokens;
  ImageLimits image_limits;
  int64_t prefill_chunk = 256;
  // Prompt cache (runtime/prefix_cache.h) budget in MiB (--cache-mb; tests use fractions): prompt
  // blocks and vision-encoder outputs, LRU-evicted. 0 turns it off.
  double cache_mb = 1024;
  // Draft decoding (runtime/drafts.h): kAuto = MTP drafts when the checkpoint has MTP layers, else
  // copy drafts; kOff for --no-drafts. Output never depends on it (only speed does).
  DraftOptions drafts;
};

class Engine final : public EngineApi {
 public:
  // Loads the checkpoint (every admission check) and starts the engine thread.
  static Expected<std::unique_ptr<Engine>> create(const EngineOptions& opts);
  ~Engine() override;

  EngineInfo info() const override;
  bool ready() const override { return true; }
  std::shared_ptr<RequestChannel> submit(GenerationRequest request) override;
  Expected<std::vector<int32_t>> tokenize(const GenerationRequest& request) override;
  Expected<std::string> detokenize(const std::vector<int32_t>& ids) override;
  std::string metrics_text() const override;

  struct Sequence;  // engine-thread state of one request

 private:
  Engine() = default;
  void loop();
  Expected<Prompt> build_prompt(const GenerationRequest& r) const;
  void admit(std::unique_ptr<Sequence>& s);
  bool step(Sequence& s);  // false when the sequence finished
  void emit_token(Sequence& s, int32_t tok, std::span<const float> logits);
  // Appends and emits one sampled token, then applies the stop conditions; false when finished.
  bool take_token(Sequence& s, int32_t tok, std::span<const float> logits);
  // One decode step: the last token (plus drafts when the sequence drafts). False when finished.
  bool decode(Sequence& s);
  void finish(Sequence& s, const std::string& reason);
  // engine_cache.cpp: restores the longest cached block-aligned proper prefix of the prompt into
  // `cache` (fresh) and returns its length (0: none); keys gets the prompt's block keys.
  int64_t resume_from_cache(const Prompt& p, SequenceCache& cache, std::vector<std::string>& keys);
  // Vision rows [Σ n_tokens, hidden] of the images that have rows at or after resume_pos, from the
  // vision cache or the encoder; rows_done = rows of the first such image before resume_pos.
  // Encodes image by image and stops (error) as soon as *cancelled is set: a client that leaves
  // during vision encoding is dropped after the image being encoded.
  Expected<DeviceBuffer> encode_images_from(const Prompt& p, int64_t resume_pos, int64_t& rows_done,
                                            const std::atomic<bool>* cancelled = nullptr);
  // Caches the prompt blocks that end in (begin, end], just computed by a prefill forward.
  void cache_prompt_blocks(const std::vector<std::string>& keys, SequenceCache& cache, int64_t begin,
                           int64_t end);
  void cache_prompt_blocks_into(const std::vector<std::string>& keys, SequenceCache& cache, int64_t begin,
                                int64_t end);

  EngineOptions opts_;
  std::unique_ptr<Pipeline> pipe_;
  int64_t context_ = 0;
  DraftMode draft_mode_ = DraftMode::kOff;  // resolved from opts_.drafts.mode
  int64_t created_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  bool stop_ = false;
  std::thread thread_;
  mutable EngineMetrics metrics_;
  std::unique_ptr<PrefixCache> cache_;  // null when --cache-mb 0; engine thread only
};

}  // namespace tf
