// The engine: one thread owns the model; HTTP threads submit requests and read events from a
// per-request channel. Continuous batching over up to `parallel` sequences: each step is ONE
// forward (Model::forward_step) over the rows of every running sequence — the decode rows of all
// decoding sequences (plus their drafts), then prefill chunks while the step's token budget lasts —
// so the weights are read once per step, not once per sequence. New requests start while others
// decode. A sequence's numbers never depend on what else is in the step (docs/design.md, invariant 2).
//
// Device failure: a backend call that throws DeviceError (a CUDA error; backend/device_error.h) fails the
// engine for good: every request it holds (running, preempted or queued) is answered 503 (code
// "engine_failed", Retry-After: another engine, or a restarted server, can take it) — tokens already sent
// stay as they were, none is sent after the failure, and no failed request ever ends as a success; it frees
// its requests' memory and its prompt cache, reports ready() false and health() "failed" with the error,
// answers every later request 503 at once, and its thread ends. An EngineGroup routes around it.
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
  bool enforce_eager = false;   // every step op by op (PipelineOptions::enforce_eager)
  int64_t context = 0;          // 0: the model's max_position_embeddings
  int parallel = 4;
  bool no_thinking = false;          // default chat_template_kwargs {"enable_thinking": false}
  std::string name;                  // served model name
  std::optional<float> temperature;  // serve-level default beating generation_config.json
  std::optional<int64_t> max_tokens;
  ImageLimits image_limits;
  // Most prompt rows one sequence prefills per step (a multiple of 64). 0: 256 on the CPU (steps stay
  // short for the decoding sequences next to it), 2048 on a GPU (fewer, fuller steps).
  int64_t prefill_chunk = 0;
  // Rows one step may hold (--max-batch-tokens): decode rows first, then prefill chunks. 0: the
  // default (2048 on the CPU, 8192 on a GPU). At least one prefill chunk always runs.
  int64_t max_batch_tokens = 0;
  // Requests waiting for a slot (--max-queue); past it a request is refused with 503 at once.
  int64_t max_queue = 1024;
  // The paged K/V pool in MiB (--kv-cache-mb). 0: on a GPU 90 % of the memory free after the
  // weights less 2 GiB of working space; on the CPU a quarter of physical memory; at most what
  // `parallel` sequences of the full context need either way.
  double kv_cache_mb = 0;
  // Recurrent-state slots of hybrid families (Qwen3.5: conv window + delta-rule state per linear
  // layer) for the live sequences. 0: `parallel`. Fewer than `parallel` makes sequences wait or be
  // preempted when the slots run out (tests).
  int64_t state_slots = 0;
  // Prompt cache (runtime/prefix_cache.h) budget in MiB (--cache-mb; tests use fractions): prompt
  // blocks and vision-encoder outputs, LRU-evicted. 0 turns it off.
  double cache_mb = 1024;
  // More state-pool slots, for the prompt cache's snapshots of hybrid families' recurrent state
  // (one per cached block; models/layers/state_pool.h). -1: as many as half of cache_mb pays for (at
  // most kMaxSnapshotSlots), that half leaving the byte budget; n >= 0: n more, on top of cache_mb.
  // Snapshots may take any free slot; a live sequence that finds none evicts cached blocks first.
  int64_t snapshot_slots = -1;
  static constexpr int64_t kMaxSnapshotSlots = 1024;
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
  bool ready() const override { return !failed_.load(); }
  std::vector<EngineHealth> health() const override;
  std::shared_ptr<RequestChannel> submit(GenerationRequest request) override;
  Expected<std::vector<int32_t>> tokenize(const GenerationRequest& request) override;
  Expected<std::string> detokenize(const std::vector<int32_t>& ids) override;
  std::string metrics_text() const override;
  // While held, queued requests wait in the queue (running ones go on); on release the next step
  // admits every request that fits at once. Lets tests start several requests in one step.
  void hold_admission(bool hold);
  // The backend the engine computes on (tests arm test_hooks::fail_backend_op on it).
  Backend& backend() const;

  struct Sequence;  // engine-thread state of one request (engine_sequence.h)
  struct Work;      // one sequence's rows in a step

 private:
  Engine() = default;
  void loop();
  // engine_step.cpp: admits requests and runs steps until stopped. active: the running sequences;
  // incoming: those being admitted (both seen by fail() when a DeviceError leaves the loop).
  void run_loop(std::vector<std::unique_ptr<Sequence>>& active,
                std::vector<std::unique_ptr<Sequence>>& incoming);
  // A DeviceError reached the loop: answers every request 503 and frees them (engine.cpp).
  void fail(std::vector<std::unique_ptr<Sequence>>& active, std::vector<std::unique_ptr<Sequence>>& incoming,
            const std::string& what);
  EngineEvent failed_event() const;
  Expected<Prompt> build_prompt(const GenerationRequest& r) const;
  void admit(std::unique_ptr<Sequence>& s);
  // engine_step.cpp: one step over the active sequences (finished ones are reset).
  void run_step(std::vector<std::unique_ptr<Sequence>>& active);
  // engine_vision.cpp: the vision phase of the step's new sequences: their images (those after the
  // prompt-cache resume point, not in the vision cache) encoded in one encoder call; ok[i] false when
  // sequence i finished (a bad image: 400; a client that left: client-left).
  void run_vision(const std::vector<Sequence*>& seqs, std::vector<bool>& ok);
  // The rows of a prefill chunk of at most max_rows (false: none fit) / of a decode step.
  bool plan_prefill(Sequence& s, int64_t max_rows, Work& w);
  // The decode rows of every decoding sequence (with its drafts), in admission order; the MTP drafts of
  // all of them come from one Model::propose_mtp_batch call. A sequence that fails is finished with an
  // error and reset in `active`.
  void plan_decodes(std::vector<std::unique_ptr<Sequence>>& active, std::vector<Work>& work);
  bool plan_replay(Sequence& s, int64_t max_rows, Work& w);
  // After the forward: caches prompt blocks, takes the sampled tokens and emits; false when the sequence
  // finished. records: the work's logit rows' Backend::sample records [rows, width] (StepOutput::kSampled:
  // the token, then the logprobs the request asked for), sampled on the device.
  bool finish_work(Work& w, const int32_t* records, int64_t width);
  void emit_token(Sequence& s, const int32_t* record);
  // Appends and emits one sampled token (record[0]), then applies the stop conditions; false when finished.
  bool take_token(Sequence& s, const int32_t* record);
  void finish(Sequence& s, const std::string& reason);
  // Ends a sequence at max_tokens (or when the pool cannot grow it alone), flushing held text.
  void finish_length(Sequence& s);
  // A fresh cache for the sequence (resumed from the prompt cache where it can be); the phase goes
  // back to the vision or prefill start. Used at admission and after a preemption.
  Status start_cache(Sequence& s);
  // Sizes the model's paged K/V pool from --kv-cache-mb or the memory there is.
  Status size_kv_pool();
  // engine_step.cpp: the pool blocks every planned row needs, evicting prompt-cache blocks and then
  // preempting the most recently admitted sequences until they fit; drops the work of those.
  void reserve_blocks(std::vector<Work>& work, std::vector<std::unique_ptr<Sequence>>& active);
  // Frees the sequence's blocks and requeues it at the front; it recomputes its prompt and output
  // when readmitted (its output does not change: rows never depend on the batch).
  void preempt(std::unique_ptr<Sequence>& s);
  // Positions a (re)admitted sequence needs before it decodes: prompt + output so far.
  int64_t blocks_to_start(const Sequence& s) const;
  // engine_cache.cpp: restores the longest cached block-aligned proper prefix of the prompt into
  // `cache` (fresh) and returns its length (0: none); keys gets the prompt's block keys.
  int64_t resume_from_cache(const Prompt& p, SequenceCache& cache, std::vector<std::string>& keys);
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
  int64_t max_batch_tokens_ = 0;  // resolved opts_.max_batch_tokens
  int64_t admitted_ = 0;          // admission counter (preemption takes the newest first)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  bool stop_ = false;
  bool held_ = false;  // hold_admission
  std::atomic<bool> failed_{false};
  std::string failure_;  // why (under mu_)
  std::thread thread_;
  mutable EngineMetrics metrics_;
  std::unique_ptr<PrefixCache> cache_;  // null when --cache-mb 0; engine thread only
  size_t snapshot_bytes_ = 0;           // of cache_mb, spent on state-pool snapshot slots
};

}  // namespace tf
