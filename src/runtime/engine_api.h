// What the server (and the CLI) see of the engine: requests in, events out. The server never
// includes models/ or backend/; it only knows these types (docs/design.md: server -> runtime only).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/sampler.h"

namespace tf {

using ordered_json = nlohmann::ordered_json;

struct GenerationRequest {
  std::string id;  // "chatcmpl-…" / "cmpl-…", for logs
  // Exactly one of: chat messages (OpenAI shape; image parts keep their position and refer to
  // `images` in order of appearance), a text prompt, or prompt token ids.
  std::optional<ordered_json> messages;
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  std::vector<std::vector<uint8_t>> images;  // encoded image bytes (PNG/JPEG/WebP), decoded by the engine
  ordered_json chat_template_kwargs = ordered_json::object();
  std::optional<ordered_json> tools;
  bool add_generation_prompt = true;

  SamplingParams sampling;
  // Which of `sampling`'s fields the request (or a serve flag such as --temperature) set. The
  // engine fills the others from generation_config.json (HF defaults where that is silent).
  struct SamplingGiven {
    bool temperature = false, top_p = false, top_k = false, seed = false;
  } sampling_given;
  int64_t max_tokens = 0;  // 0: not given (the engine decides: up to the context)
  bool ignore_eos = false;
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  bool use_drafts = true;
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t draft_proposed = 0;
  int64_t draft_accepted = 0;
};

struct EngineEvent {
  enum class Kind { Started, Token, Finished, Error } kind = Kind::Token;
  // Started: the prompt is built and admitted.
  std::vector<int32_t> prompt_ids;
  // Token: one generated token and the complete UTF-8 text it completes (may be empty).
  int32_t token = -1;
  std::string text;
  std::optional<TokenLogprob> logprob;
  std::vector<TokenLogprob> top_logprobs;
  // Finished: "stop", "length" (or "client-left", "error" for logs).
  std::string finish_reason;
  Usage usage;
  // Error: HTTP status and OpenAI error fields.
  int http_status = 0;
  std::string message, type, param, code;
  int retry_after_s = 0;  // > 0: a Retry-After header (503 when the queue is full)
};

// One request's event queue: the engine pushes, the HTTP thread pops.
class RequestChannel {
 public:
  void push(EngineEvent e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  // Waits up to timeout_ms; nullopt on timeout (the caller checks its client, then waits again).
  std::optional<EngineEvent> pop(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !q_.empty(); }))
      return std::nullopt;
    EngineEvent e = std::move(q_.front());
    q_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineEvent> q_;
};

struct TokenizeResult {
  std::vector<int32_t> ids;
};

struct EngineInfo {
  std::string model_name;
  std::string family;
  int64_t context_length = 0;
  bool vision = false;
  int64_t created_unix = 0;
};

// One engine's state for GET /health: "ok" (serving), "loading", or "failed" (its device failed: it
// answered its requests 503 and takes no new one; `error` says why).
struct EngineHealth {
  std::string status;
  std::string error;
};

class EngineApi {
 public:
  virtual ~EngineApi() = default;
  virtual EngineInfo info() const = 0;
  virtual bool ready() const = 0;  // false while loading or once failed (/health answers 503)
  // Each engine behind this one (one for an engine, several for a group), in order.
  virtual std::vector<EngineHealth> health() const { return {EngineHealth{ready() ? "ok" : "loading", ""}}; }
  // Queues a request; events arrive on the returned channel, ending with Finished or Error.
  virtual std::shared_ptr<RequestChannel> submit(GenerationRequest request) = 0;
  // Prompt ids for a request as submit() would build them (messages or prompt), without images decoded
  // into pixels beyond what placeholder expansion needs.
  virtual Expected<std::vector<int32_t>> tokenize(const GenerationRequest& request) = 0;
  virtual Expected<std::string> detokenize(const std::vector<int32_t>& ids) = 0;
  // Prometheus text exposition of the engine's counters and histograms.
  virtual std::string metrics_text() const = 0;
};

}  // namespace tf
