#include "text/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/jinja/ustr.h"

namespace tf {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

bool read_file(const std::filesystem::path& p, std::string* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

Expected<json> read_json(const std::filesystem::path& p, bool* exists) {
  std::string text;
  *exists = read_file(p, &text);
  if (!*exists) return json();
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Error{p.string() + ": invalid JSON"};
  return j;
}

std::string py_strip(const std::string& s) { return jinja::ustr::strip(s, nullptr, true, true); }

}  // namespace

Expected<ChatTemplate> ChatTemplate::create(std::string source, json special_tokens) {
  if (!special_tokens.is_object()) return Error{"chat template: special tokens must be a JSON object"};
  ChatTemplate ct;
  TF_ASSIGN(ct.template_, jinja::Template::parse(source));
  ct.source_ = std::move(source);
  ct.special_tokens_ = std::move(special_tokens);
  return ct;
}

Expected<std::string> ChatTemplate::apply(const json& messages, const ChatTemplateOptions& opts) const {
  if (!messages.is_array()) return Error{"chat template: messages must be a JSON array"};
  if (messages.empty()) {
    return Error{"Cannot apply chat template to an empty conversation. Provide at least one message."};
  }
  if (opts.continue_final_message && opts.add_generation_prompt) {
    return Error{
        "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message "
        "when you want the model to continue the final message, and add_generation_prompt when you want to "
        "add a header that will prompt it to start a new assistant message instead."};
  }
  if (!opts.tools.is_null()) {
    if (!opts.tools.is_array()) return Error{"chat template: tools must be a list of JSON objects"};
    for (const auto& t : opts.tools) {
      if (!t.is_object()) return Error{"chat template: each tool must be a JSON object (a JSON schema)"};
    }
  }
  if (!opts.documents.is_null()) {
    if (!opts.documents.is_array()) return Error{"chat template: documents must be a list of JSON objects"};
    for (const auto& d : opts.documents) {
      if (!d.is_object()) return Error{"Documents should be a list of dicts with 'title' and 'text' keys!"};
    }
  }
  if (!opts.kwargs.is_object()) return Error{"chat template: extra kwargs must be a JSON object"};
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
    if (opts.kwargs.contains(reserved)) {
      return Error{std::string("chat template: '") + reserved + "' cannot be passed as an extra kwarg"};
    }
  }

  json chat = messages;
  std::string final_message;
  if (opts.continue_final_message) {
    json& last = chat.back();
    if (!last.is_object() || !last.contains("content")) {
      return Error{"continue_final_message is set but the final message does not have a content field!"};
    }
    if (source_.find("content") == std::string::npos) {
      return Error{"continue_final_message is set but the chat template does not use the message content!"};
    }
    json& content = last["content"];
    if (content.is_array()) {
      bool found = false;
      for (auto it = content.rbegin(); it != content.rend(); ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          final_message = (*it)["text"].get<std::string>();
          (*it)["text"] = final_message + kContinueTag;
          found = true;
          break;
        }
      }
      if (!found) {
        return Error{
            "continue_final_message is set but we could not find any text to continue in the final message!"};
      }
    } else if (content.is_string()) {
      final_message = content.get<std::string>();
      content = final_message + kContinueTag;
    } else {
      return Error{"continue_final_message is set but the final message content is not text"};
    }
  }

  json ctx = json::object();
  ctx["messages"] = std::move(chat);
  ctx["tools"] = opts.tools;
  ctx["documents"] = opts.documents;
  ctx["add_generation_prompt"] = opts.add_generation_prompt;
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it) ctx[it.key()] = it.value();
  for (auto it = opts.kwargs.begin(); it != opts.kwargs.end(); ++it) ctx[it.key()] = it.value();

  TF_ASSIGN(std::string rendered, template_.render(ctx));
  if (!opts.continue_final_message) return rendered;

  const std::string tag_stripped = py_strip(kContinueTag);
  if (rendered.find(py_strip(final_message)) == std::string::npos ||
      rendered.find(tag_stripped) == std::string::npos) {
    return Error{
        "continue_final_message is set but the final message does not appear in the chat after applying "
        "the chat template! This can happen if the chat template deletes portions of the final message. "
        "Please verify the chat template and final message in your chat to ensure they are compatible."};
  }
  const size_t tag_loc = rendered.rfind(tag_stripped);
  if (rendered.compare(tag_loc, std::string(kContinueTag).size(), kContinueTag) == 0)
    return rendered.substr(0, tag_loc);
  return jinja::ustr::strip(rendered.substr(0, tag_loc), nullptr, false, true);
}

Expected<std::string> load_chat_template_source(const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(checkpoint_dir);
  std::string text;
  if (read_file(dir / "chat_template.jinja", &text)) return text;
  bool exists = false;
  TF_ASSIGN(json processor, read_json(dir / "chat_template.json", &exists));
  if (exists) {
    if (processor.is_object() && processor.contains("chat_template") &&
        processor["chat_template"].is_string()) {
      return processor["chat_template"].get<std::string>();
    }
    return Error{(dir / "chat_template.json").string() + ": no \"chat_template\" string"};
  }
  TF_ASSIGN(json config, read_json(dir / "tokenizer_config.json", &exists));
  if (!exists || !config.is_object() || !config.contains("chat_template") ||
      config["chat_template"].is_null()) {
    return Error{checkpoint_dir +
                 ": no chat template (chat_template.jinja, chat_template.json or tokenizer_config.json "
                 "\"chat_template\")"};
  }
  const json& ct = config["chat_template"];
  if (ct.is_string()) return ct.get<std::string>();
  if (ct.is_array()) {
    for (const auto& entry : ct) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    return Error{checkpoint_dir + "/tokenizer_config.json: chat_template list has no \"default\" entry"};
  }
  return Error{checkpoint_dir + "/tokenizer_config.json: \"chat_template\" must be a string or a list"};
}

Expected<json> load_special_tokens_map(const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(checkpoint_dir);
  bool has_config = false, has_map = false;
  TF_ASSIGN(json config, read_json(dir / "tokenizer_config.json", &has_config));
  TF_ASSIGN(json map, read_json(dir / "special_tokens_map.json", &has_map));
  json out = json::object();
  std::vector<std::string> keys = {"bos_token", "eos_token", "unk_token", "sep_token",
                                   "pad_token", "cls_token", "mask_token"};
  // Named model-specific tokens (e.g. LightOnOCR's image_token) set at the top level of
  // tokenizer_config.json are part of special_tokens_map too (seen in the oracle's hf_context.json).
  if (has_config && config.is_object()) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      const std::string& k = it.key();
      if (k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0 &&
          std::find(keys.begin(), keys.end(), k) == keys.end() &&
          (it.value().is_string() || (it.value().is_object() && it.value().contains("content")))) {
        keys.push_back(k);
      }
    }
  }
  for (const std::string& key : keys) {
    const json* v = nullptr;
    if (has_config && config.is_object() && config.contains(key))
      v = &config[key];
    else if (has_map && map.is_object() && map.contains(key))
      v = &map[key];
    if (!v || v->is_null()) continue;
    if (v->is_string()) {
      out[key] = *v;
    } else if (v->is_object() && v->contains("content") && (*v)["content"].is_string()) {
      out[key] = (*v)["content"];
    } else {
      return Error{checkpoint_dir + ": special token \"" + key +
                   "\" must be a string or an AddedToken object"};
    }
  }
  return out;
}

Expected<ChatTemplate> load_chat_template(const std::string& checkpoint_dir) {
  TF_ASSIGN(std::string source, load_chat_template_source(checkpoint_dir));
  TF_ASSIGN(json special, load_special_tokens_map(checkpoint_dir));
  return ChatTemplate::create(std::move(source), std::move(special));
}

}  // namespace tf
