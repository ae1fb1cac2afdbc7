#include "runtime/pipeline.h"

#include <chrono>

#include "base/log.h"
#include "image/decode.h"
#include "models/registry.h"

namespace tf {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// HF GenerationConfig semantics: fields absent from generation_config.json keep the class defaults
// (do_sample False, temperature 1.0, top_k 50, top_p 1.0).
Expected<GenerationDefaults> read_generation_defaults(const Checkpoint& ck, const ModelInfo& info) {
  GenerationDefaults d;
  d.sampling.temperature = 1.0f;
  d.sampling.top_k = 50;
  d.sampling.top_p = 1.0f;
  std::vector<int64_t> eos = info.eos_token_ids;
  d.source = "config.json";
  if (ck.generation_config) {
    const JsonConfig& g = *ck.generation_config;
    d.source = "generation_config.json";
    TF_ASSIGN(d.do_sample, g.get_bool("do_sample", false));
    TF_ASSIGN(double t, g.get_number("temperature", 1.0));
    TF_ASSIGN(double p, g.get_number("top_p", 1.0));
    TF_ASSIGN(int64_t k, g.get_int("top_k", 50));
    if (t < 0 || p <= 0 || p > 1 || k < 0)
      return make_error("generation_config.json: temperature, top_p or top_k out of range");
    d.sampling.temperature = static_cast<float>(t);
    d.sampling.top_p = static_cast<float>(p);
    d.sampling.top_k = static_cast<int>(k);
    TF_ASSIGN(std::vector<int64_t> ge, g.get_ids("eos_token_id", eos));
    eos = ge;
  }
  if (!d.do_sample) d.sampling.temperature = 0.0f;
  for (int64_t e : eos) d.eos_token_ids.push_back(static_cast<int32_t>(e));
  return d;
}

}  // namespace

Expected<std::unique_ptr<Pipeline>> Pipeline::load(const std::string& checkpoint,
                                                   const PipelineOptions& opts) {
  std::unique_ptr<Pipeline> p(new Pipeline());
  TF_ASSIGN(Checkpoint ck, open_checkpoint(checkpoint));
  p->ckpt_ = std::make_unique<Checkpoint>(std::move(ck));
  const Checkpoint& c = *p->ckpt_;
  if (c.tokenizer_json.empty()) return make_error(c.dir + ": checkpoint has no tokenizer.json");
  std::string tok_cfg = c.tokenizer_config ? c.dir + "/tokenizer_config.json" : "";
  TF_ASSIGN(Tokenizer tok, Tokenizer::load(c.tokenizer_json, tok_cfg));
  p->tokenizer_ = std::make_unique<Tokenizer>(std::move(tok));
  TF_ASSIGN(p->backend_, create_backend(opts.backend));
  if (opts.enforce_eager) p->backend_->disable_capture();
  // The registry checks config and every weight before allocating anything large.
  TF_ASSIGN(p->model_, load_model(c.config, std::move(p->ckpt_->weights), *p->backend_));
  auto tmpl = load_chat_template(c.dir);
  if (tmpl.ok()) {
    p->chat_template_ = std::move(tmpl).value();
    p->template_origin_ = "checkpoint";
  } else {
    p->template_origin_ = "none (" + tmpl.error().message + ")";
  }
  const ModelInfo& info = p->model_->info();
  if (opts.vision && info.image_token_id >= 0) {
    if (!c.image_processor_config)
      return make_error(c.dir +
                        ": the model has an image tower but no preprocessor_config.json or "
                        "processor_config.json; pass --no-vision to serve text only");
    TF_ASSIGN(p->image_processor_,
              make_image_processor(info.model_type, c.image_processor_config->json(), info));
    auto id = p->tokenizer_->token_to_id(p->image_processor_->placeholder());
    if (!id || *id != info.image_token_id)
      return make_error(c.dir + ": tokenizer id of " + p->image_processor_->placeholder() + " is " +
                        (id ? std::to_string(*id) : std::string("missing")) +
                        " but config.json says image_token_id " + std::to_string(info.image_token_id));
    p->placeholder_id_ = *id;
  }
  TF_ASSIGN(p->defaults_, read_generation_defaults(c, info));
  return p;
}

Expected<std::vector<ProcessedImage>> Pipeline::process_images(
    const std::vector<std::vector<uint8_t>>& images, const ImageLimits& limits,
    const std::atomic<bool>* cancelled) const {
  std::vector<ProcessedImage> out;
  if (images.empty()) return out;
  if (!image_processor_) return make_error("this model serves text only; image inputs are refused");
  for (size_t i = 0; i < images.size(); ++i) {
    if (cancelled && cancelled->load()) return make_error("the client left during image decoding");
    TF_ASSIGN(Image img, decode_image(images[i], static_cast<int>(i + 1), limits));
    TF_ASSIGN(ProcessedImage pi, image_processor_->process(img, static_cast<int>(i + 1)));
    out.push_back(std::move(pi));
  }
  return out;
}

Expected<std::vector<int32_t>> Pipeline::tokenize_with_images(
    const std::string& text, const std::vector<ProcessedImage>& images) const {
  // The processor expands each placeholder in the text before tokenizing; the placeholder is an
  // added token, which splits the text into independent pieces, so expanding ids is identical.
  TF_ASSIGN(std::vector<int32_t> ids, tokenizer_->encode(text, /*add_special_tokens=*/false));
  if (placeholder_id_ < 0) return ids;
  size_t n_placeholders = 0;
  for (int32_t id : ids) n_placeholders += id == placeholder_id_;
  if (n_placeholders != images.size())
    return make_error("the prompt has " + std::to_string(n_placeholders) + " image placeholders but " +
                      std::to_string(images.size()) + " images were given");
  if (images.empty()) return ids;
  std::vector<int32_t> out;
  size_t k = 0;
  for (int32_t id : ids) {
    if (id != placeholder_id_) {
      out.push_back(id);
      continue;
    }
    out.insert(out.end(), static_cast<size_t>(images[k++].n_tokens), id);
  }
  return out;
}

Expected<Prompt> Pipeline::build_chat_prompt(const nlohmann::ordered_json& messages,
                                             const std::vector<std::vector<uint8_t>>& images,
                                             const ChatTemplateOptions& opts, const ImageLimits& limits,
                                             const std::atomic<bool>* cancelled) const {
  if (!chat_template_) return make_error("this checkpoint has no chat template; send a plain prompt instead");
  Prompt p;
  TF_ASSIGN(p.text, chat_template_->apply(messages, opts));
  TF_ASSIGN(p.images, process_images(images, limits, cancelled));
  TF_ASSIGN(p.ids, tokenize_with_images(p.text, p.images));
  return p;
}

Expected<Prompt> Pipeline::build_text_prompt(const std::string& text) const {
  Prompt p;
  p.text = text;
  TF_ASSIGN(p.ids, tokenize_with_images(text, {}));
  return p;
}

Expected<std::vector<int32_t>> Pipeline::tokenize_text(const std::string& text) const {
  return tokenizer_->encode(text, /*add_special_tokens=*/false);
}

Expected<GenerateResult> generate(Pipeline& p, const Prompt& prompt, const GenerateOptions& opts,
                                  const std::function<bool(int32_t)>& on_token) {
  Model& m = p.model();
  const ModelInfo& info = m.info();
  GenerateResult r;
  const int64_t n_prompt = static_cast<int64_t>(prompt.ids.size());
  if (n_prompt == 0) return make_error("the prompt is empty");
  auto t0 = std::chrono::steady_clock::now();
  DeviceBuffer embeds;
  if (!prompt.images.empty()) {
    std::vector<ImageInput> inputs;
    for (const auto& im : prompt.images) inputs.push_back(im.as_input());
    TF_ASSIGN(embeds, m.encode_images(inputs));
  }
  r.vision_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  // One sequence at a time: a paged K/V pool (sized once, at the first generation) of one context.
  const int64_t cap = n_prompt + opts.max_tokens;
  (void)m.set_kv_pool_blocks(
      (std::max(cap, std::min<int64_t>(info.max_position_embeddings, 32768)) + kKvBlock - 1) / kKvBlock);
  (void)m.set_state_slots(1);  // hybrid families: the one sequence's recurrent state (sized once)
  auto cache = m.new_cache(cap);
  std::vector<std::vector<int64_t>> grids;
  for (const auto& im : prompt.images) grids.push_back(im.grid_thw);
  TF_TRY(m.begin_prompt(*cache, prompt.ids, grids));
  TF_ASSIGN(DraftMode mode, resolve_draft_mode(opts.drafts.mode, m));
  std::optional<Drafter> drafter;
  if (mode != DraftMode::kOff) {
    drafter.emplace(m, mode, opts.drafts);
    TF_TRY(drafter->begin(*cache));
  }
  r.drafts = draft_mode_name(mode);
  // Chunk boundaries on multiples of 64 from position 0 keep Qwen3.5's delta-rule chunks where a
  // single full pass puts them (docs/design.md, invariant 2: chunking never changes a row's numbers).
  const int64_t want =
      opts.prefill_chunk > 0 ? opts.prefill_chunk : (m.backend().name() == "cpu" ? 512 : 8192);
  const int64_t chunk = std::max<int64_t>(64, want / 64 * 64);
  // Each token is chosen on the device (Backend::sample, as the engine's steps choose it): the forward
  // returns each logit row's record, whose first entry is the token for output position out_pos + row.
  auto forward_sampled = [&](ForwardBatch& b, uint64_t out_pos) -> Expected<Buffer> {
    b.sample.clear();
    for (size_t i = 0; i < b.logit_rows.size(); ++i)
      b.sample.push_back(sample_row(opts.sampling, out_pos + i));
    const Segment seg{&b, cache.get()};
    return m.forward_step(std::span<const Segment>(&seg, 1), StepOutput::kSampled);
  };
  // Prefill in chunks; rows of an image may span chunks, so hand each chunk its slice of rows.
  int64_t image_rows_done = 0;
  Buffer records;
  for (int64_t begin = 0; begin < n_prompt; begin += chunk) {
    int64_t end = std::min(n_prompt, begin + chunk);
    ForwardBatch b;
    int64_t n_img = 0;
    for (int64_t i = begin; i < end; ++i) {
      b.token_ids.push_back(prompt.ids[i]);
      b.positions.push_back(static_cast<int32_t>(i));
      n_img += prompt.ids[i] == info.image_token_id;
    }
    Tensor slice;
    if (n_img > 0) {
      if (embeds.empty()) return make_error("the prompt has image tokens but no images");
      slice = embeds.tensor().slice_rows(image_rows_done, image_rows_done + n_img);
      b.image_embeds = &slice;
    }
    image_rows_done += n_img;
    if (end == n_prompt) b.logit_rows = {static_cast<int32_t>(end - begin - 1)};
    TF_ASSIGN(records, forward_sampled(b, 0));
  }
  r.prefill_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto& eos = p.defaults().eos_token_ids;
  r.finish_reason = "length";
  // false when generation ends at this token (drafted steps stop exactly where plain decoding would).
  auto take = [&](int32_t tok) {
    r.ids.push_back(tok);
    if (on_token && !on_token(tok)) {
      r.finish_reason = "cancelled";
      return false;
    }
    if (!opts.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end()) {
      r.finish_reason = "stop";
      return false;
    }
    return static_cast<int64_t>(r.ids.size()) < opts.max_tokens;
  };
  bool more = take(records.as<int32_t>()[0]);
  while (more) {
    ++r.decode_steps;
    if (drafter) {
      TF_ASSIGN(Drafter::Step st, drafter->step(*cache, prompt.ids, r.ids, opts.sampling,
                                                opts.max_tokens - static_cast<int64_t>(r.ids.size())));
      for (size_t i = 0; i < st.tokens.size() && more; ++i) {
        if (static_cast<int>(i) < st.accepted) drafter->count_accepted(1);
        more = take(st.tokens[i]);
      }
      continue;
    }
    ForwardBatch b;
    b.token_ids = {r.ids.back()};
    b.positions = {static_cast<int32_t>(n_prompt + static_cast<int64_t>(r.ids.size()) - 1)};
    b.logit_rows = {0};
    TF_ASSIGN(records, forward_sampled(b, static_cast<uint64_t>(r.ids.size())));
    more = take(records.as<int32_t>()[0]);
  }
  if (drafter) {
    r.draft_proposed = drafter->proposed();
    r.draft_accepted = drafter->accepted();
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

}  // namespace tf
