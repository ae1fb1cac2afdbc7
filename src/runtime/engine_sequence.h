// The engine thread's state of one request (runtime/engine.h), shared by engine.cpp (admission,
// token output, finishing) and engine_step.cpp (the batched step).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "text/detokenizer.h"

namespace tf {

using Clock = std::chrono::steady_clock;

struct Engine::Sequence {
  // Replay: after a preemption, the output tokens before the last are recomputed (as decode rows)
  // once the prompt is; then decoding continues where it stopped.
  enum class Phase { Vision, Prefill, Replay, Decode } phase = Phase::Vision;
  GenerationRequest req;
  std::shared_ptr<RequestChannel> channel;
  Clock::time_point t_start = Clock::now();
  Prompt prompt;
  int64_t max_tokens = 0;
  std::vector<int32_t> eos;
  DeviceBuffer image_embeds;
  int64_t image_rows_done = 0;
  std::unique_ptr<SequenceCache> cache;
  int64_t n_prefilled = 0;
  int64_t n_cached = 0;                 // prompt positions restored from the prompt cache
  std::vector<std::string> block_keys;  // the prompt's block keys (prompt cache on)
  std::vector<int32_t> output;
  std::optional<IncrementalDetokenizer> detok;
  std::string text_pending;        // decoded text held back while it may start a stop string
  std::optional<Drafter> drafter;  // set when this sequence decodes with drafts
  int64_t admit_order = 0;         // larger: admitted later
  bool preempted = false;          // waiting in the queue for readmission
  int64_t n_replayed = 0;          // Replay: output tokens recomputed so far
  bool finished = false;           // finish() ran: its channel has its last event
};

// One sequence's share of a step: a prefill chunk, or its decode rows (the last token, plus drafts
// when it drafts).
struct Engine::Work {
  Sequence* s = nullptr;
  bool prefill = false;
  bool replay = false;  // output rows recomputed after a preemption
  ForwardBatch batch;
  Tensor image_slice;  // the chunk's image rows (batch.image_embeds is pointed here before the forward)
  std::optional<Drafter::Plan> plan;  // decode with drafts
  int64_t image_rows_after = 0;       // prefill: s->image_rows_done once the chunk ran
};

inline EngineEvent make_event(EngineEvent::Kind kind) {
  EngineEvent e;
  e.kind = kind;
  return e;
}

inline EngineEvent error_event(int status, std::string message, std::string code = "",
                               std::string param = "") {
  EngineEvent e = make_event(EngineEvent::Kind::Error);
  e.http_status = status;
  e.message = std::move(message);
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

}  // namespace tf
