// tensorfold tokenize CKPT (--text STR | --messages FILE.json): prompt ids as Transformers'
// processor + apply_chat_template compute them, image parts expanded by the family's processor.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "runtime/pipeline.h"
#include "server/media.h"

namespace tf::cli {
namespace {

const char* kHelp =
    "usage: tensorfold tokenize CKPT (--text STR | --messages FILE.json) [options]\n"
    "  --text STR                  encode STR as the tokenizer does (special tokens recognised, no "
    "template,\n"
    "                              image placeholders kept as single ids)\n"
    "  --messages FILE.json        OpenAI-style messages array, rendered with the checkpoint's chat "
    "template;\n"
    "                              image parts (image_url with a data: URL or a file path, or {\"type\": "
    "\"image\",\n"
    "                              \"image\": PATH}) are expanded by the family's processor\n"
    "  --no-thinking               chat_template_kwargs {\"enable_thinking\": false}\n"
    "  --chat-template-kwargs JSON extra template variables\n"
    "  --no-generation-prompt      do not append the assistant turn header\n"
    "prints {\"ids\": [...], \"count\": N, \"token_sha256\": sha256 of the comma-joined ids}\n";

int fail(const std::string& msg) {
  std::fprintf(stderr, "tensorfold tokenize: %s\n", msg.c_str());
  return 1;
}

// Image bytes of one content part; the path may be relative to the messages file.
Expected<std::vector<uint8_t>> part_bytes(const nlohmann::ordered_json& part, int index,
                                          const std::string& base) {
  std::string url;
  if (part.contains("image_url")) {
    const auto& iu = part["image_url"];
    url = iu.is_object() ? iu.value("url", "") : iu.is_string() ? iu.get<std::string>() : "";
  } else if (part.contains("image") && part["image"].is_string()) {
    url = part["image"].get<std::string>();
  } else if (part.contains("path") && part["path"].is_string()) {
    url = part["path"].get<std::string>();
  } else if (part.contains("url") && part["url"].is_string()) {
    url = part["url"].get<std::string>();
  }
  if (url.empty()) return make_error("image " + std::to_string(index) + " has no image_url, image or path");
  if (url.rfind("data:", 0) == 0) {
    MediaPolicy policy;
    return load_image_url(url, index, policy);
  }
  if (url.rfind("file://", 0) == 0) url = url.substr(7);
  std::filesystem::path p(url);
  if (p.is_relative()) p = std::filesystem::path(base) / p;
  TF_ASSIGN(std::string s, read_file(p.string()));
  return std::vector<uint8_t>(s.begin(), s.end());
}

bool is_image_part(const nlohmann::ordered_json& part) {
  if (!part.is_object()) return false;
  std::string type = part.value("type", "");
  return type == "image" || type == "image_url" || part.contains("image") || part.contains("image_url");
}

}  // namespace

int tokenize_main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv, 2, {"--text", "--messages", "--chat-template-kwargs"},
                           {"--no-thinking", "--no-generation-prompt", "--help"});
  if (!parsed.ok()) {
    std::fprintf(stderr, "tensorfold tokenize: %s\n", parsed.error().message.c_str());
    return 2;
  }
  const Args& a = *parsed;
  if (a.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (a.positional.size() != 1 || a.has("--text") == a.has("--messages")) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  PipelineOptions po;
  auto pipe = Pipeline::load(a.positional[0], po);
  if (!pipe.ok()) return fail(pipe.error().message);
  Pipeline& p = **pipe;
  Expected<Prompt> prompt = make_error("");
  if (auto text = a.get("--text")) {
    // As the tokenizer encodes it: placeholders stay single ids (no images to expand them with).
    auto ids = p.tokenize_text(*text);
    if (!ids.ok()) return fail(ids.error().message);
    prompt = Prompt{*text, std::move(ids).value(), {}};
  } else {
    std::string file = *a.get("--messages");
    auto body = read_file(file);
    if (!body.ok()) return fail(body.error().message);
    nlohmann::ordered_json messages = nlohmann::ordered_json::parse(*body, nullptr, false);
    if (messages.is_discarded() || !messages.is_array()) return fail(file + ": not a JSON array of messages");
    ChatTemplateOptions opts;
    opts.add_generation_prompt = !a.has("--no-generation-prompt");
    if (auto kw = a.get("--chat-template-kwargs")) {
      auto j = nlohmann::ordered_json::parse(*kw, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return fail("--chat-template-kwargs must be a JSON object");
      opts.kwargs = j;
    }
    if (a.has("--no-thinking")) opts.kwargs["enable_thinking"] = false;
    std::vector<std::vector<uint8_t>> images;
    std::string base = std::filesystem::path(file).parent_path().string();
    for (const auto& m : messages) {
      if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
      for (const auto& part : m["content"]) {
        if (!is_image_part(part)) continue;
        auto bytes = part_bytes(part, static_cast<int>(images.size() + 1), base);
        if (!bytes.ok()) return fail(bytes.error().message);
        images.push_back(std::move(bytes).value());
      }
    }
    prompt = p.build_chat_prompt(messages, images, opts);
  }
  if (!prompt.ok()) return fail(prompt.error().message);
  nlohmann::ordered_json out;
  out["ids"] = prompt->ids;
  out["count"] = prompt->ids.size();
  out["token_sha256"] = token_sha256(prompt->ids);
  std::puts(out.dump().c_str());
  return 0;
}

}  // namespace tf::cli
