// Chat templates as Transformers 5.17 applies them (PreTrainedTokenizerBase.apply_chat_template with
// tokenize=False): the render context is, in this order, messages, tools, documents,
// add_generation_prompt, the tokenizer's special_tokens_map, then the caller's extra kwargs (which
// win over a special token of the same name). continue_final_message and the empty-conversation
// check behave as in Transformers.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "text/jinja/template.h"

namespace tf {

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  bool continue_final_message = false;
  nlohmann::ordered_json tools;                                      // null: not given (template sees None)
  nlohmann::ordered_json documents;                                  // null: not given (template sees None)
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // e.g. {"enable_thinking": false}
};

class ChatTemplate {
 public:
  // special_tokens: the tokenizer's special_tokens_map, e.g. {"eos_token": "<|im_end|>",
  // "pad_token": "<|endoftext|>"} for Qwen3 (tokens that are None are absent).
  static Expected<ChatTemplate> create(
      std::string source, nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

  // messages: an OpenAI/HF-style array of message objects.
  Expected<std::string> apply(const nlohmann::ordered_json& messages,
                              const ChatTemplateOptions& opts = {}) const;

  const std::string& source() const { return source_; }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }
  jinja::RenderLimits& limits() { return template_.limits; }

 private:
  std::string source_;
  nlohmann::ordered_json special_tokens_;
  jinja::Template template_;
};

// The chat template a checkpoint directory carries: chat_template.jinja, else chat_template.json
// {"chat_template": ...}, else tokenizer_config.json "chat_template" (a string, or a list of
// {"name", "template"} from which "default" is taken).
Expected<std::string> load_chat_template_source(const std::string& checkpoint_dir);

// special_tokens_map as Transformers builds it from tokenizer_config.json (bos, eos, unk, sep, pad,
// cls, mask, then other top-level "*_token" string entries such as image_token; AddedToken objects
// reduced to their "content"; null entries omitted), with special_tokens_map.json filling
// attributes the config does not set.
Expected<nlohmann::ordered_json> load_special_tokens_map(const std::string& checkpoint_dir);

// Both of the above: the checkpoint's ChatTemplate.
Expected<ChatTemplate> load_chat_template(const std::string& checkpoint_dir);

}  // namespace tf
