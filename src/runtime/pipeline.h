// A loaded checkpoint ready to run: model on a backend, tokenizer, chat template, image processor
// and generation defaults. Builds prompts exactly as Transformers' processor + apply_chat_template
// do, and runs single-sequence generation (the CLI path; the engine batches sequences).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "image/image.h"
#include "io/checkpoint.h"
#include "models/model.h"
#include "models/processor.h"
#include "runtime/drafts.h"
#include "runtime/sampler.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace tf {

struct GenerationDefaults {
  SamplingParams sampling;  // temperature 0 when do_sample is false
  bool do_sample = false;
  std::vector<int32_t> eos_token_ids;
  std::string source;  // "generation_config.json" or "config.json"
};

struct Prompt {
  std::string text;  // rendered template ("" for id prompts)
  std::vector<int32_t> ids;
  std::vector<ProcessedImage> images;  // in placeholder order
};

struct PipelineOptions {
  std::string backend = "cpu";
  bool vision = true;          // false: serve text only even when the checkpoint has a tower
  bool enforce_eager = false;  // --enforce-eager: no recorded steps (Backend::disable_capture)
};

class Pipeline {
 public:
  static Expected<std::unique_ptr<Pipeline>> load(const std::string& checkpoint, const PipelineOptions& opts);

  const ModelInfo& info() const { return model_->info(); }
  Model& model() { return *model_; }
  Backend& backend() { return *backend_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate* chat_template() const { return chat_template_ ? &*chat_template_ : nullptr; }
  const ImageProcessor* image_processor() const { return image_processor_.get(); }
  const GenerationDefaults& defaults() const { return defaults_; }
  const Checkpoint& checkpoint() const { return *ckpt_; }
  const std::string& chat_template_source() const { return template_origin_; }

  // messages: OpenAI/HF-style array; image parts ({"type": "image"}, {"type": "image_url", ...})
  // take images[i] in order of appearance. Errors are user-facing (HTTP 400 material).
  Expected<Prompt> build_chat_prompt(const nlohmann::ordered_json& messages,
                                     const std::vector<std::vector<uint8_t>>& images,
                                     const ChatTemplateOptions& opts, const ImageLimits& limits = {},
                                     const std::atomic<bool>* cancelled = nullptr) const;
  // Raw text, special tokens recognised, no template, for generation: a placeholder token in it
  // is refused (a text prompt carries no images to fill it).
  Expected<Prompt> build_text_prompt(const std::string& text) const;
  // Raw text as the tokenizer encodes it (Transformers' tokenizer(text, add_special_tokens=False)):
  // special tokens recognised, placeholders kept as single ids, never expanded or refused. What
  // `tokenize --text` and /v1/tokenize with a `prompt` return.
  Expected<std::vector<int32_t>> tokenize_text(const std::string& text) const;
  // Decoded images -> processed images (decode errors name the image). Stops with an error before the
  // next image once *cancelled is set (a client that left during image decoding).
  Expected<std::vector<ProcessedImage>> process_images(const std::vector<std::vector<uint8_t>>& images,
                                                       const ImageLimits& limits,
                                                       const std::atomic<bool>* cancelled = nullptr) const;
  // Rendered text + processed images -> ids with each placeholder expanded.
  Expected<std::vector<int32_t>> tokenize_with_images(const std::string& text,
                                                      const std::vector<ProcessedImage>& images) const;

 private:
  Pipeline() = default;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::string template_origin_;
  std::unique_ptr<ImageProcessor> image_processor_;
  int32_t placeholder_id_ = -1;
  GenerationDefaults defaults_;
};

struct GenerateOptions {
  SamplingParams sampling;
  int64_t max_tokens = 256;
  bool ignore_eos = false;
  // Prompt positions per prefill forward (a multiple of 64); 0: by backend, 512 on the CPU (memory of the
  // activations), 8,192 on a GPU (a page's prompt in one forward: each chunk costs every layer's launches
  // and the delta rule's per-call latency again). Chunking never changes a row's numbers.
  int64_t prefill_chunk = 0;
  DraftOptions drafts;  // kAuto: MTP drafts when the checkpoint has them, else copy; kOff: plain
};

struct GenerateResult {
  std::vector<int32_t> ids;
  std::string finish_reason;  // "stop" | "length"
  double prefill_seconds = 0, decode_seconds = 0, vision_seconds = 0;
  std::string drafts = "off";                      // the draft source used
  int64_t draft_proposed = 0, draft_accepted = 0;  // accepted: drafts emitted as output
  int64_t decode_steps = 0;                        // decode forwards after the prefill
};

// Greedy or seeded sampling for one prompt. on_token(id) returns false to stop early ("cancelled").
Expected<GenerateResult> generate(Pipeline& p, const Prompt& prompt, const GenerateOptions& opts,
                                  const std::function<bool(int32_t)>& on_token = {});

}  // namespace tf
