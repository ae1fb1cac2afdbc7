#include "runtime/engine.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <random>

#include "base/log.h"
#include "base/sha256.h"
#include "text/detokenizer.h"

namespace tf {

using Clock = std::chrono::steady_clock;

struct Engine::Sequence {
  enum class Phase { Vision, Prefill, Decode } phase = Phase::Vision;
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
  Buffer logits;                   // [1, vocab] of the last forward
  std::optional<Drafter> drafter;  // set when this sequence decodes with drafts
};

namespace {

EngineEvent make_event(EngineEvent::Kind kind) {
  EngineEvent e;
  e.kind = kind;
  return e;
}

EngineEvent error_event(int status, std::string message, std::string code = "", std::string param = "") {
  EngineEvent e = make_event(EngineEvent::Kind::Error);
  e.http_status = status;
  e.message = std::move(message);
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

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

Expected<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  std::unique_ptr<Engine> e(new Engine());
  e->opts_ = opts;
  PipelineOptions po;
  po.backend = opts.backend;
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
  e->opts_.prefill_chunk = std::max<int64_t>(64, opts.prefill_chunk / 64 * 64);
  TF_ASSIGN(e->draft_mode_, resolve_draft_mode(opts.drafts.mode, e->pipe_->model()));
  if (e->draft_mode_ != DraftMode::kOff)
    log_info(std::string("drafts: ") + draft_mode_name(e->draft_mode_) + ", up to " +
             std::to_string(opts.drafts.k) + " per step (verified: output equals plain decoding)");
  if (opts.cache_mb > 0) {
    e->cache_ = std::make_unique<PrefixCache>(static_cast<size_t>(opts.cache_mb * 1048576.0));
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
  s.cache = pipe_->model().new_cache(n + s.max_tokens);
  std::vector<std::vector<int64_t>> grids;
  for (const auto& im : s.prompt.images) grids.push_back(im.grid_thw);
  if (Status st = pipe_->model().begin_prompt(*s.cache, s.prompt.ids, grids); !st.ok()) {
    s.channel->push(error_event(400, st.error().message));
    finish(s, "error");
    sp.reset();
    return;
  }
  s.n_cached = resume_from_cache(s.prompt, *s.cache, s.block_keys);
  s.n_prefilled = s.n_cached;
  if (draft_mode_ != DraftMode::kOff && s.req.use_drafts) {
    s.drafter.emplace(pipe_->model(), draft_mode_, opts_.drafts);
    if (Status st = s.drafter->begin(*s.cache); !st.ok()) {
      s.channel->push(error_event(500, st.error().message));
      finish(s, "error");
      sp.reset();
      return;
    }
  }
  s.phase = s.prompt.images.empty() ? Sequence::Phase::Prefill : Sequence::Phase::Vision;
  EngineEvent started = make_event(EngineEvent::Kind::Started);
  started.prompt_ids = s.prompt.ids;
  s.channel->push(std::move(started));
}

void Engine::finish(Sequence& s, const std::string& reason) {
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

void Engine::emit_token(Sequence& s, int32_t tok, std::span<const float> logits) {
  EngineEvent e = make_event(EngineEvent::Kind::Token);
  e.token = tok;
  if (s.req.logprobs) {
    float mx = -INFINITY;
    for (float v : logits) mx = std::max(mx, v);
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
    float lse = mx + static_cast<float>(std::log(sum));
    e.logprob = TokenLogprob{tok, logits[tok] - lse};
    if (s.req.top_logprobs > 0) {
      std::vector<int32_t> idx(logits.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
      size_t k = std::min(idx.size(), static_cast<size_t>(s.req.top_logprobs));
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      for (size_t i = 0; i < k; ++i) e.top_logprobs.push_back({idx[i], logits[idx[i]] - lse});
    }
  }
  s.text_pending += s.detok->push(tok);
  size_t hold = s.req.stop.empty() ? 0 : stop_holdback(s.text_pending, s.req.stop);
  e.text = s.text_pending.substr(0, s.text_pending.size() - hold);
  s.text_pending.erase(0, e.text.size());
  s.channel->push(std::move(e));
}

// One unit of work for one sequence. Returns false when it finished (events already sent).
bool Engine::step(Sequence& s) {
  if (s.req.cancelled->load()) {
    finish(s, "client-left");
    return false;
  }
  Model& m = pipe_->model();
  const ModelInfo& info = m.info();
  if (s.phase == Sequence::Phase::Vision) {
    // Only images with rows after the resume point; identical images come from the vision cache.
    auto emb = encode_images_from(s.prompt, s.n_cached, s.image_rows_done, s.req.cancelled.get());
    if (!emb.ok() && s.req.cancelled->load()) {
      finish(s, "client-left");
      return false;
    }
    if (!emb.ok()) {
      s.channel->push(error_event(400, emb.error().message));
      finish(s, "error");
      return false;
    }
    s.image_embeds = std::move(emb).value();
    s.phase = Sequence::Phase::Prefill;
    return true;
  }
  if (s.phase == Sequence::Phase::Decode) return decode(s);
  ForwardBatch b;
  const int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size());
  Tensor slice;
  if (s.phase == Sequence::Phase::Prefill) {
    int64_t begin = s.n_prefilled, end = std::min(n_prompt, begin + opts_.prefill_chunk);
    int64_t n_img = 0;
    for (int64_t i = begin; i < end; ++i) {
      b.token_ids.push_back(s.prompt.ids[i]);
      b.positions.push_back(static_cast<int32_t>(i));
      n_img += s.prompt.ids[i] == info.image_token_id && !s.image_embeds.empty();
    }
    if (n_img > 0) {
      slice = s.image_embeds.tensor().slice_rows(s.image_rows_done, s.image_rows_done + n_img);
      b.image_embeds = &slice;
      s.image_rows_done += n_img;
    }
    if (end == n_prompt) b.logit_rows = {static_cast<int32_t>(end - begin - 1)};
    b.keep_block_states = cache_ != nullptr;
    s.n_prefilled = end;
  }
  auto logits = m.forward(b, *s.cache);
  if (!logits.ok()) {
    s.channel->push(error_event(400, logits.error().message));
    finish(s, "error");
    return false;
  }
  cache_prompt_blocks(s.block_keys, *s.cache, b.positions.front(), b.positions.back() + 1);
  if (b.logit_rows.empty()) return true;  // more prefill to do
  s.phase = Sequence::Phase::Decode;
  s.logits = std::move(logits).value();
  std::span<const float> row(s.logits.as<float>(), static_cast<size_t>(info.vocab_size));
  int32_t tok = sample_token(row, s.req.sampling, static_cast<uint64_t>(s.output.size()));
  return take_token(s, tok, row);
}

bool Engine::decode(Sequence& s) {
  Model& m = pipe_->model();
  const int64_t vocab = m.info().vocab_size;
  const int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size());
  if (s.drafter) {
    const int64_t left = s.max_tokens - static_cast<int64_t>(s.output.size());
    auto st = s.drafter->step(*s.cache, s.prompt.ids, s.output, s.req.sampling, left);
    if (!st.ok()) {
      s.channel->push(error_event(500, st.error().message));
      finish(s, "error");
      return false;
    }
    // Tokens one at a time through the same stop checks as plain decoding, so a stop cuts exactly
    // where it would have cut there.
    for (size_t i = 0; i < st->tokens.size(); ++i) {
      if (static_cast<int>(i) < st->accepted) s.drafter->count_accepted(1);  // before finish() reads it
      std::span<const float> row(st->logits.as<float>() + i * static_cast<size_t>(vocab),
                                 static_cast<size_t>(vocab));
      if (!take_token(s, st->tokens[i], row)) return false;
    }
    return true;
  }
  ForwardBatch b;
  b.token_ids = {s.output.back()};
  b.positions = {static_cast<int32_t>(n_prompt + static_cast<int64_t>(s.output.size()) - 1)};
  b.logit_rows = {0};
  auto logits = m.forward(b, *s.cache);
  if (!logits.ok()) {
    s.channel->push(error_event(400, logits.error().message));
    finish(s, "error");
    return false;
  }
  s.logits = std::move(logits).value();
  std::span<const float> row(s.logits.as<float>(), static_cast<size_t>(vocab));
  int32_t tok = sample_token(row, s.req.sampling, static_cast<uint64_t>(s.output.size()));
  return take_token(s, tok, row);
}

bool Engine::take_token(Sequence& s, int32_t tok, std::span<const float> row) {
  s.output.push_back(tok);
  emit_token(s, tok, row);
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
    std::string tail = s.detok->finish();
    if (!tail.empty() || !s.text_pending.empty()) {
      EngineEvent e = make_event(EngineEvent::Kind::Token);
      e.text = s.text_pending + tail;
      s.channel->push(std::move(e));
    }
    finish(s, "length");
    return false;
  }
  return true;
}

void Engine::loop() {
  std::vector<std::unique_ptr<Sequence>> active;
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> incoming;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !active.empty(); });
      if (stop_) return;
      while (!queue_.empty() && static_cast<int>(active.size() + incoming.size()) < opts_.parallel) {
        incoming.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.set_queue_depth(static_cast<int64_t>(queue_.size()));
    }
    for (auto& s : incoming) {
      if (s->req.cancelled->load()) {
        finish(*s, "client-left");
        continue;
      }
      admit(s);
      if (s) active.push_back(std::move(s));
    }
    auto t0 = Clock::now();
    for (auto& s : active)
      if (!step(*s)) s.reset();
    std::erase_if(active, [](const auto& s) { return !s; });
    metrics_.set_active(static_cast<int64_t>(active.size()));
    metrics_.step_seconds(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

}  // namespace tf
