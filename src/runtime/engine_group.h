// Several engines behind one EngineApi (issue 20: data parallel, one engine per GPU; `serve --devices`,
// `serve --replicas`). Each request goes to one engine:
// - affinity: a request's key (its first image's bytes, else its prompt) that an engine has served before
//   goes back to that engine, whose prompt cache and vision cache hold the page (the last kKeys keys
//   are remembered);
// - otherwise, or when that engine has more than kSlackTokens outstanding tokens above the least loaded
//   ready engine, the least loaded one takes it (outstanding tokens: each in-flight request's max_tokens,
//   kDefaultTokens where it gives none; lowest index on ties);
// - failure: an engine that is not ready (failed: EngineApi::ready() false; runtime/engine.h says what a
//   failed engine does) takes no new request, also none whose page it holds; its own requests are its to
//   answer (a failing engine answers them 503). With no ready engine the request is answered 503 with
//   Retry-After. health() lists every engine's state (GET /health: 200 while one serves).
// In flight = the request channels handed out and still held by their clients (the HTTP handler holds
// one until its response ends).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/engine_api.h"

namespace tf {

class EngineGroup final : public EngineApi {
 public:
  static constexpr int64_t kDefaultTokens = 1024, kSlackTokens = 8 * kDefaultTokens;
  static constexpr size_t kKeys = 1 << 16;
  explicit EngineGroup(std::vector<std::shared_ptr<EngineApi>> engines);

  EngineInfo info() const override;
  bool ready() const override;                        // some engine is ready
  std::vector<EngineHealth> health() const override;  // each engine's, in order
  std::shared_ptr<RequestChannel> submit(GenerationRequest request) override;
  Expected<std::vector<int32_t>> tokenize(const GenerationRequest& request) override;
  Expected<std::string> detokenize(const std::vector<int32_t>& ids) override;
  // Each engine's exposition with an engine="i" label on every sample, then the router's counters.
  std::string metrics_text() const override;

  size_t size() const { return engines_.size(); }
  // The engine a request would go to now (nullopt: none ready). Tests and logs.
  std::optional<size_t> route(const GenerationRequest& request) const;
  // The engine that served the request's affinity key last (nullopt: none remembered).
  std::optional<size_t> holder(const GenerationRequest& request) const;
  int64_t outstanding_tokens(size_t engine) const;

 private:
  struct Open {
    std::weak_ptr<RequestChannel> channel;
    int64_t tokens;
  };
  const EngineApi& any_ready() const;
  std::optional<size_t> route_locked(uint64_t key) const;
  int64_t outstanding_locked(size_t engine) const;

  std::vector<std::shared_ptr<EngineApi>> engines_;
  mutable std::mutex mu_;
  mutable std::vector<std::vector<Open>> open_;  // per engine
  std::unordered_map<uint64_t, size_t> holder_;  // affinity key -> the engine that served it last
  std::deque<uint64_t> key_order_;               // keys in the order first seen (oldest forgotten first)
  std::vector<int64_t> routed_;                  // requests sent, per engine
  int64_t spilled_ = 0;  // a remembered key sent elsewhere (its engine busier or not ready)
  int64_t refused_ = 0;  // no engine ready
};

// Affinity key of a request: FNV-1a over its first image's bytes, else over its prompt (ids, text or the
// messages' JSON), at most the first 64 KiB.
uint64_t affinity_key(const GenerationRequest& request);

// "engine=\"i\"" inserted into every sample line of a Prometheus text exposition (comment lines kept).
std::string label_metrics(const std::string& text, const std::string& label);

}  // namespace tf
