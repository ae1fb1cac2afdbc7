// The engine: one thread owns the model; HTTP threads submit requests and read events from a
// per-request channel. Continuous batching over up to `parallel` sequences: every step gives each
// active sequence one unit of work (vision encode, one prefill chunk, or one decode token), so new
// requests start while others decode. A sequence's numbers never depend on what else is active
// (each forward is computed for its own rows; DESIGN invariant 2).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "image/image.h"
#include "runtime/engine_api.h"
#include "runtime/metrics.h"
#include "runtime/pipeline.h"

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
  void finish(Sequence& s, const std::string& reason);

  EngineOptions opts_;
  std::unique_ptr<Pipeline> pipe_;
  int64_t context_ = 0;
  int64_t created_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  bool stop_ = false;
  std::thread thread_;
  mutable EngineMetrics metrics_;
};

}  // namespace tf
