#include "runtime/engine.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>

#include <unistd.h>

#include "backend/device_error.h"
#include "base/log.h"
#include "base/sha256.h"
#include "runtime/engine_sequence.h"
#include "text/detokenizer.h"

namespace tf {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& s : stops)
    for (size_t k = std::min(text.size(), s.size() - 1); k > best; --k)
      if (text.compare(text.size() - k, k, s, 0, k) == 0) {
        best = k;
        break;
      }
  return best;
}

}  // namespace

Expected<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) try {
  std::unique_ptr<Engine> e(new Engine());
  e->opts_ = opts;
  PipelineOptions po;
  po.backend = opts.backend;
  po.enforce_eager = opts.enforce_eager;
  TF_ASSIGN(e->pipe_, Pipeline::load(opts.checkpoint, po));
  const ModelInfo& info = e->pipe_->info();
  if (opts.require_vision && !e->pipe_->image_processor())
    log_warn("--vision: " + info.model_type +
             " checkpoint has no image tower; serving text only, and image requests are refused");
  e->context_ = opts.context > 0 ? opts.context : info.max_position_embeddings;
  if (info.max_position_embeddings > 0 && e->context_ > info.max_position_embeddings)
    return make_error("--context " + std::to_string(e->context_) +
                      " exceeds the model's max_position_embeddings " +
                      std::to_string(info.max_position_embeddings));
  // Prefill chunks end on multiples of 64 from position 0 (Qwen3.5's delta-rule chunk), so a
  // chunked prefill computes the same numbers as one pass.
  const bool on_cpu = e->pipe_->model().backend().name() == "cpu";
  const int64_t chunk = opts.prefill_chunk > 0 ? opts.prefill_chunk : (on_cpu ? 256 : 2048);
  e->opts_.prefill_chunk = std::max<int64_t>(64, chunk / 64 * 64);
  e->max_batch_tokens_ = opts.max_batch_tokens > 0
                             ? opts.max_batch_tokens
                             : (e->pipe_->model().backend().name() == "cpu" ? 2048 : 8192);
  TF_TRY(e->size_kv_pool());
  TF_ASSIGN(e->draft_mode_, resolve_draft_mode(opts.drafts.mode, e->pipe_->model()));
  if (e->draft_mode_ != DraftMode::kOff)
    log_info(std::string("drafts: ") + draft_mode_name(e->draft_mode_) + ", up to " +
             std::to_string(opts.drafts.k) + " per step (verified: output equals plain decoding)");
  if (opts.cache_mb > 0) {
    const size_t budget = static_cast<size_t>(opts.cache_mb * 1048576.0);
    e->cache_ = std::make_unique<PrefixCache>(budget - std::min(budget, e->snapshot_bytes_));
    log_info("prompt cache: " + std::to_string(e->cache_->budget() >> 20) + " MiB, blocks of " +
             std::to_string(PrefixCache::kBlock) + " positions");
  }
  e->created_ = static_cast<int64_t>(std::time(nullptr));
  const auto& d = e->pipe_->defaults();
  log_info("generation defaults from " + d.source + ": do_sample=" + (d.do_sample ? "true" : "false") +
           " temperature=" + std::to_string(d.sampling.temperature) +
           " top_p=" + std::to_string(d.sampling.top_p) + " top_k=" + std::to_string(d.sampling.top_k));
  e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
} catch (const DeviceError& ex) {  // while loading: no engine, a refusal like any other
  return make_error("the device failed while loading (" + opts.backend + "): " + ex.what());
}

Status Engine::size_kv_pool() {
  Model& m = pipe_->model();
  // Hybrid families' recurrent-state slots first (allocated now): the K/V pool gets what is left.
  // One per sequence in flight, and the prompt cache's snapshot slots (EngineOptions::snapshot_slots).
  const int64_t running = opts_.state_slots > 0 ? opts_.state_slots : std::max(1, opts_.parallel);
  int64_t snaps = 0;
  if (const size_t slot = m.kv_pool_stats().state_slot_bytes; slot > 0 && opts_.cache_mb > 0) {
    snaps = opts_.snapshot_slots >= 0
                ? opts_.snapshot_slots
                : std::min(EngineOptions::kMaxSnapshotSlots,
                           static_cast<int64_t>(opts_.cache_mb * 1048576.0 / 2 / static_cast<double>(slot)));
    if (opts_.snapshot_slots < 0) snapshot_bytes_ = static_cast<size_t>(snaps) * slot;
  }
  TF_TRY(m.set_state_slots(running + snaps));
  if (const Model::KvPoolStats st = m.kv_pool_stats(); st.state_slots > 0)
    log_info("state pool: " + std::to_string(st.state_slots) + " recurrent-state slots of " +
             std::to_string(st.state_slot_bytes >> 10) + " KiB (" + std::to_string(running) +
             " for sequences in flight, " + std::to_string(snaps) + " more for prompt-cache snapshots)");
  const size_t block = m.kv_block_bytes();
  if (block == 0) return {};  // per-sequence caches
  const int64_t per_seq = (context_ + kKvBlock - 1) / kKvBlock;
  const int64_t most = per_seq * std::max(1, opts_.parallel);  // every slot at the full context
  int64_t n = 0;
  std::string why;
  if (opts_.kv_cache_mb > 0) {
    n = static_cast<int64_t>(opts_.kv_cache_mb * 1048576.0 / static_cast<double>(block));
    why = "--kv-cache-mb";
  } else if (size_t free = m.backend().free_device_memory(); free > 0) {
    const double room = 0.9 * static_cast<double>(free) - 2.0 * 1073741824.0;
    n = std::min<int64_t>(most, static_cast<int64_t>(std::max(0.0, room) / static_cast<double>(block)));
    why = "90% of free GPU memory less 2 GiB, at most " + std::to_string(opts_.parallel) + " full contexts";
  } else {
    const double phys =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    n = std::min<int64_t>(most, static_cast<int64_t>(0.25 * phys / static_cast<double>(block)));
    why = "a quarter of physical memory, at most " + std::to_string(opts_.parallel) + " full contexts";
  }
  if (n < 1)
    return make_error("the K/V pool gets no block of " + std::to_string(block >> 10) + " KiB (" + why + ")");
  TF_TRY(m.set_kv_pool_blocks(n));
  log_info("K/V pool: " + std::to_string(n) + " blocks of " + std::to_string(kKvBlock) + " positions (" +
           std::to_string(n * kKvBlock) + " positions, " +
           std::to_string(static_cast<int64_t>(n * block) >> 20) + " MiB; " + why + ")");
  metrics_.set_kv_blocks(n, n, 0);
  return {};
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineInfo Engine::info() const {
  EngineInfo i;
  i.model_name = opts_.name;
  i.family = pipe_->info().family;
  i.context_length = context_;
  i.vision = pipe_->image_processor() != nullptr;
  i.created_unix = created_;
  return i;
}

std::shared_ptr<RequestChannel> Engine::submit(GenerationRequest request) {
  auto s = std::make_unique<Sequence>();
  s->req = std::move(request);
  s->channel = std::make_shared<RequestChannel>();
  auto ch = s->channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) {
      ch->push(failed_event());
      metrics_.finished("engine_failed", 0, 0, 0);
      metrics_.failed_request();
      return ch;
    }
    if (static_cast<int64_t>(queue_.size()) >= opts_.max_queue) {
      EngineEvent e = error_event(503,
                                  "the server is busy: " + std::to_string(queue_.size()) +
                                      " requests are waiting (--max-queue); retry later",
                                  "server_busy");
      e.retry_after_s = 1;
      ch->push(std::move(e));
      metrics_.finished("refused", 0, 0, 0);
      return ch;
    }
    queue_.push_back(std::move(s));
    metrics_.set_queue_depth(static_cast<int64_t>(queue_.size()));
  }
  cv_.notify_one();
  return ch;
}

Expected<Prompt> Engine::build_prompt(const GenerationRequest& r) const {
  if (r.prompt_ids) {
    Prompt p;
    p.ids = *r.prompt_ids;
    int64_t vocab = pipe_->info().vocab_size;
    for (int32_t id : p.ids)
      if (id < 0 || id >= vocab)
        return make_error("prompt token id " + std::to_string(id) + " is out of range");
    return p;
  }
  if (r.prompt_text) return pipe_->build_text_prompt(*r.prompt_text);
  if (!r.messages) return make_error("the request has neither messages nor a prompt");
  if (!r.images.empty() && !pipe_->image_processor())
    return make_error("this server serves a text-only model; image inputs are refused");
  ChatTemplateOptions o;
  o.add_generation_prompt = r.add_generation_prompt;
  if (r.tools) o.tools = *r.tools;
  if (opts_.no_thinking) o.kwargs["enable_thinking"] = false;
  for (auto it = r.chat_template_kwargs.begin(); it != r.chat_template_kwargs.end(); ++it)
    o.kwargs[it.key()] = *it;
  return pipe_->build_chat_prompt(*r.messages, r.images, o, opts_.image_limits, r.cancelled.get());
}

Expected<std::vector<int32_t>> Engine::tokenize(const GenerationRequest& request) {
  // Raw text is tokenized as the tokenizer does; only chat messages expand image placeholders.
  if (request.prompt_text && !request.prompt_ids) return pipe_->tokenize_text(*request.prompt_text);
  TF_ASSIGN(Prompt p, build_prompt(request));
  return p.ids;
}

Expected<std::string> Engine::detokenize(const std::vector<int32_t>& ids) {
  return pipe_->tokenizer().decode(ids, /*skip_special_tokens=*/false);
}

std::string Engine::metrics_text() const { return metrics_.text(); }

void Engine::loop() {
  std::vector<std::unique_ptr<Sequence>> active, incoming;
  try {
    backend().bind_thread();  // this thread's work goes to the engine's device
    run_loop(active, incoming);
  } catch (const DeviceError& e) {
    // From admission or a step, anywhere on this thread: the engine is out for good (engine.h).
    fail(active, incoming, e.what());
  }
}

Backend& Engine::backend() const { return pipe_->model().backend(); }

std::vector<EngineHealth> Engine::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {failed_ ? EngineHealth{"failed", failure_} : EngineHealth{"ok", ""}};
}

EngineEvent Engine::failed_event() const {  // under mu_ or on the engine thread after the failure
  EngineEvent e = error_event(503, failure_ + "; this request was not completed: retry it", "engine_failed");
  e.retry_after_s = 1;
  return e;
}

void Engine::fail(std::vector<std::unique_ptr<Sequence>>& active,
                  std::vector<std::unique_ptr<Sequence>>& incoming, const std::string& what) {
  const std::string device = opts_.backend == "auto" ? std::string(backend().name()) : opts_.backend;
  std::deque<std::unique_ptr<Sequence>> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = "the engine on " + device + " failed: " + what;
    failed_ = true;  // from here on submit() answers 503 itself
    queued.swap(queue_);
  }
  metrics_.set_failed();
  size_t n_open = 0;
  for (const auto* list : {&active, &incoming})
    for (const auto& sp : *list) n_open += sp && !sp->finished;
  for (const auto& sp : queued) n_open += sp && !sp->finished;
  log_error(failure_ + " — it takes no new requests; answering its " + std::to_string(n_open) +
            " requests 503");
  auto answer = [&](std::unique_ptr<Sequence>& sp) {
    if (!sp || sp->finished) return;  // finished before the failure (or never admitted)
    if (sp->req.cancelled->load()) return finish(*sp, "client-left");
    metrics_.failed_request();  // counted before the client can see the answer
    finish(*sp, "engine_failed");
    sp->channel->push(failed_event());
  };
  metrics_.set_active(0);
  metrics_.set_queue_depth(0);
  for (auto& sp : active) answer(sp);
  for (auto& sp : incoming) answer(sp);
  for (auto& sp : queued) answer(sp);
  // What the engine holds goes back (free_memory never throws, also on a failed device): the requests'
  // K/V blocks, image embeddings and drafters, then the prompt cache's blocks and vision outputs.
  active.clear();
  incoming.clear();
  queued.clear();
  cache_.reset();
}

void Engine::admit(std::unique_ptr<Sequence>& sp) {
  Sequence& s = *sp;
  auto prompt = build_prompt(s.req);
  if (!prompt.ok() && s.req.cancelled->load()) {  // left while its images were decoded
    finish(s, "client-left");
    sp.reset();
    return;
  }
  if (!prompt.ok()) {
    s.channel->push(error_event(400, prompt.error().message));
    finish(s, "error");
    sp.reset();
    return;
  }
  s.prompt = std::move(prompt).value();
  const int64_t n = static_cast<int64_t>(s.prompt.ids.size());
  if (n == 0) {
    s.channel->push(error_event(400, "the prompt is empty"));
    finish(s, "error");
    sp.reset();
    return;
  }
  // Image rows must match the images (a token-id prompt may hold placeholders and no images):
  // refuse before anything runs, so a refused request leaves the prompt cache untouched.
  int64_t n_image_rows = 0, n_image_tokens = 0;
  for (const auto& im : s.prompt.images) n_image_rows += im.n_tokens;
  for (int32_t id : s.prompt.ids) n_image_tokens += id == pipe_->info().image_token_id;
  if (n_image_tokens != n_image_rows) {
    s.channel->push(error_event(400, "the prompt has " + std::to_string(n_image_tokens) +
                                         " image placeholder tokens but its images fill " +
                                         std::to_string(n_image_rows)));
    finish(s, "error");
    sp.reset();
    return;
  }
  if (s.req.max_tokens > 0) {
    s.max_tokens = s.req.max_tokens;
  } else {
    s.max_tokens = opts_.max_tokens.value_or(context_ - n);
  }
  if (n + s.max_tokens > context_ || (s.req.max_tokens <= 0 && s.max_tokens <= 0)) {
    s.channel->push(error_event(400,
                                "this model's context is " + std::to_string(context_) +
                                    " tokens; the prompt has " + std::to_string(n) +
                                    " and max_tokens asks for " + std::to_string(s.max_tokens),
                                "context_length_exceeded", "messages"));
    finish(s, "error");
    sp.reset();
    return;
  }
  // Fields the request left out come from the serve flags, then generation_config.json.
  const GenerationDefaults& d = pipe_->defaults();
  SamplingParams& sp_ = s.req.sampling;
  const auto& given = s.req.sampling_given;
  if (!given.temperature) sp_.temperature = opts_.temperature ? *opts_.temperature : d.sampling.temperature;
  if (!given.top_p) sp_.top_p = d.sampling.top_p;
  if (!given.top_k) sp_.top_k = d.sampling.top_k;
  if (!given.seed) sp_.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  s.eos = d.eos_token_ids;
  s.detok.emplace(pipe_->tokenizer(), /*skip_special_tokens=*/true);
  // The paged K/V pool must hold the prompt alone (a sequence that later runs out while alone in
  // the engine ends with "length"; with others it is preempted and recomputed).
  const Model::KvPoolStats pool = pipe_->model().kv_pool_stats();
  if (pool.blocks > 0 && (n + 1 + kKvBlock - 1) / kKvBlock > pool.blocks) {
    s.channel->push(error_event(400,
                                "the prompt has " + std::to_string(n) + " tokens; the K/V pool holds " +
                                    std::to_string(pool.blocks * kKvBlock) + " positions (" +
                                    std::to_string(pool.blocks) + " blocks of " + std::to_string(kKvBlock) +
                                    "; --kv-cache-mb)",
                                "kv_cache_exceeded", "messages"));
    finish(s, "error");
    sp.reset();
    return;
  }
  if (draft_mode_ != DraftMode::kOff && s.req.use_drafts)
    s.drafter.emplace(pipe_->model(), draft_mode_, opts_.drafts);
  if (Status st = start_cache(s); !st.ok()) {
    s.channel->push(error_event(st.error().message.rfind("drafts", 0) == 0 ? 500 : 400, st.error().message));
    finish(s, "error");
    sp.reset();
    return;
  }
  EngineEvent started = make_event(EngineEvent::Kind::Started);
  started.prompt_ids = s.prompt.ids;
  s.channel->push(std::move(started));
}

Status Engine::start_cache(Sequence& s) {
  Model& m = pipe_->model();
  s.cache.reset();  // a preempted sequence's blocks go back first
  s.cache = m.new_cache(static_cast<int64_t>(s.prompt.ids.size()) + s.max_tokens);
  std::vector<std::vector<int64_t>> grids;
  for (const auto& im : s.prompt.images) grids.push_back(im.grid_thw);
  TF_TRY(m.begin_prompt(*s.cache, s.prompt.ids, grids));
  s.n_cached = resume_from_cache(s.prompt, *s.cache, s.block_keys);
  s.n_prefilled = s.n_cached;
  s.n_replayed = 0;
  s.image_embeds.reset();
  s.image_rows_done = 0;
  if (s.drafter)
    if (Status st = s.drafter->begin(*s.cache); !st.ok()) return make_error("drafts: " + st.error().message);
  s.phase = s.prompt.images.empty() ? Sequence::Phase::Prefill : Sequence::Phase::Vision;
  return {};
}

void Engine::finish(Sequence& s, const std::string& reason) {
  s.finished = true;
  double secs = std::chrono::duration<double>(Clock::now() - s.t_start).count();
  int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size());
  int64_t n_out = static_cast<int64_t>(s.output.size());
  metrics_.finished(reason, n_prompt, n_out, s.n_cached);
  const int64_t proposed = s.drafter ? s.drafter->proposed() : 0,
                accepted = s.drafter ? s.drafter->accepted() : 0;
  metrics_.drafts(proposed, accepted);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2fs", secs);
  log_info(s.req.id + " reason=" + reason + " prompt=" + std::to_string(n_prompt) +
           " tokens=" + std::to_string(n_out) + " cached=" + std::to_string(s.n_cached) +
           " drafts=" + std::to_string(accepted) + "/" + std::to_string(proposed) + " after=" + buf);
  if (reason == "stop" || reason == "length") {
    EngineEvent e = make_event(EngineEvent::Kind::Finished);
    e.finish_reason = reason;
    e.usage.prompt_tokens = n_prompt;
    e.usage.completion_tokens = n_out;
    e.usage.cached_tokens = s.n_cached;
    e.usage.draft_proposed = proposed;
    e.usage.draft_accepted = accepted;
    s.channel->push(std::move(e));
  }
}

void Engine::emit_token(Sequence& s, const int32_t* record) {
  EngineEvent e = make_event(EngineEvent::Kind::Token);
  const int32_t tok = record[0];
  e.token = tok;
  if (s.req.logprobs) {
    // Computed on the device beside the token (Backend::sample; on the CPU sampling::logprobs).
    auto f32 = [&](int64_t c) {
      float v;
      std::memcpy(&v, record + c, sizeof v);
      return v;
    };
    e.logprob = TokenLogprob{tok, f32(1)};
    const int64_t k = std::min<int64_t>(s.req.top_logprobs, pipe_->info().vocab_size);
    for (int64_t j = 0; j < k; ++j) e.top_logprobs.push_back({record[2 + 2 * j], f32(3 + 2 * j)});
  }
  s.text_pending += s.detok->push(tok);
  size_t hold = s.req.stop.empty() ? 0 : stop_holdback(s.text_pending, s.req.stop);
  e.text = s.text_pending.substr(0, s.text_pending.size() - hold);
  s.text_pending.erase(0, e.text.size());
  s.channel->push(std::move(e));
}

bool Engine::take_token(Sequence& s, const int32_t* record) {
  const int32_t tok = record[0];
  s.output.push_back(tok);
  emit_token(s, record);
  bool is_eos = std::find(s.eos.begin(), s.eos.end(), tok) != s.eos.end();
  if (!s.req.ignore_eos && is_eos) {
    finish(s, "stop");
    return false;
  }
  for (const auto& stop : s.req.stop) {
    // A stop string ends the output; text from it on is never sent (it was held back).
    if (!stop.empty() && s.text_pending.find(stop) != std::string::npos) {
      finish(s, "stop");
      return false;
    }
  }
  if (static_cast<int64_t>(s.output.size()) >= s.max_tokens) {
    finish_length(s);
    return false;
  }
  return true;
}

void Engine::finish_length(Sequence& s) {
  std::string tail = s.detok->finish();
  if (!tail.empty() || !s.text_pending.empty()) {
    EngineEvent e = make_event(EngineEvent::Kind::Token);
    e.text = s.text_pending + tail;
    s.channel->push(std::move(e));
  }
  finish(s, "length");
}

}  // namespace tf
