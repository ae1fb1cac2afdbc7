#include "server/request_parse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace tf {
namespace {

using json = ordered_json;
using Err = std::optional<ApiError>;

std::string num_str(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

Err type_error(const std::string& param, const std::string& what) {
  return bad_request("'" + param + "' must be " + what, param);
}

bool present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

Err get_bool(const json& j, const char* key, bool* out) {
  if (!present(j, key)) return std::nullopt;
  if (!j[key].is_boolean()) return type_error(key, "a boolean");
  *out = j[key].get<bool>();
  return std::nullopt;
}

Err get_int(const json& j, const std::string& key, int64_t* out) {
  const json& v = j[key];
  if (!v.is_number_integer()) return type_error(key, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    return bad_request("'" + key + "' is too large", key);
  *out = v.get<int64_t>();
  return std::nullopt;
}

Err get_number(const json& j, const char* key, double* out) {
  const json& v = j[key];
  if (!v.is_number()) return type_error(key, "a number");
  *out = v.get<double>();
  if (!std::isfinite(*out)) return type_error(key, "a finite number");
  return std::nullopt;
}

Err parse_model(const json& j, const ParseContext& ctx) {
  if (!present(j, "model")) return std::nullopt;
  if (!j["model"].is_string()) return type_error("model", "a string");
  std::string m = j["model"].get<std::string>();
  if (std::find(ctx.accepted_models.begin(), ctx.accepted_models.end(), m) != ctx.accepted_models.end())
    return std::nullopt;
  // OpenAI and vLLM answer an unknown model with 404 model_not_found (type invalid_request_error).
  ApiError e = bad_request(
      "model '" + user_text(m) + "' is not served here; this server serves '" + ctx.served_name + "'",
      "model", "model_not_found");
  e.status = 404;
  e.type = "invalid_request_error";
  return e;
}

const char* kPartsMessage = "content parts must be text or image_url; audio and video inputs are unsupported";

// Validates one message's content parts; image parts are loaded into gen->images in order and their
// URL is replaced by a short reference, so megabytes of base64 never reach the chat template.
Err parse_parts(json& content, const std::string& where, const ParseContext& ctx, GenerationRequest* gen) {
  for (size_t k = 0; k < content.size(); ++k) {
    json& part = content[k];
    std::string p = where + "[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return type_error(p, "an object with a string 'type'");
    std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) return type_error(p + ".text", "a string");
    } else if (type == "image_url") {
      const json* url = nullptr;
      if (part.contains("image_url") && part["image_url"].is_string())
        url = &part["image_url"];
      else if (part.contains("image_url") && part["image_url"].is_object() &&
               part["image_url"].contains("url"))
        url = &part["image_url"]["url"];
      if (!url || !url->is_string()) return type_error(p + ".image_url.url", "a string");
      int index = static_cast<int>(gen->images.size()) + 1;
      if (!ctx.vision)
        return bad_request(
            "image inputs are unsupported: this server runs without a vision encoder "
            "(start it with --vision on a vision checkpoint)",
            p);
      auto bytes = load_image_url(url->get<std::string>(), index, ctx.media);
      if (!bytes.ok()) return bad_request(bytes.error().message, p + ".image_url");
      gen->images.push_back(std::move(bytes).value());
      json ref = json::object();
      ref["url"] = "image:" + std::to_string(index);
      part["image_url"] = std::move(ref);
    } else {
      return bad_request(kPartsMessage, p + ".type");
    }
  }
  return std::nullopt;
}

Err parse_messages(json& msgs, const ParseContext& ctx, GenerationRequest* gen) {
  if (!msgs.is_array() || msgs.empty()) return type_error("messages", "a non-empty array");
  static const char* kRoles[] = {"system", "user", "assistant", "tool", "developer"};
  for (size_t i = 0; i < msgs.size(); ++i) {
    json& m = msgs[i];
    std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return type_error(p, "an object");
    if (!m.contains("role") || !m["role"].is_string())
      return type_error(p + ".role", "one of system, user, assistant, tool, developer");
    std::string role = m["role"].get<std::string>();
    if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return role == r; }))
      return type_error(p + ".role", "one of system, user, assistant, tool, developer");
    if (!m.contains("content") || m["content"].is_null()) {
      if (role == "assistant") continue;  // an assistant turn with tool_calls only
      return type_error(p + ".content", "a string or an array of content parts");
    }
    json& c = m["content"];
    if (c.is_string()) continue;
    if (!c.is_array()) return type_error(p + ".content", "a string or an array of content parts");
    if (Err e = parse_parts(c, p + ".content", ctx, gen)) return e;
  }
  return std::nullopt;
}

Err parse_prompt(const json& j, GenerationRequest* gen) {
  const json& pr = j["prompt"];
  const char* what = "a string or a list of token ids (one prompt per request)";
  const json* ids = nullptr;
  if (pr.is_string()) {
    if (pr.get_ref<const std::string&>().empty()) return bad_request("'prompt' must not be empty", "prompt");
    gen->prompt_text = pr.get<std::string>();
    return std::nullopt;
  }
  if (!pr.is_array() || pr.empty()) return type_error("prompt", what);
  if (pr.size() == 1 && pr[0].is_string()) {
    if (pr[0].get_ref<const std::string&>().empty())
      return bad_request("'prompt' must not be empty", "prompt");
    gen->prompt_text = pr[0].get<std::string>();
    return std::nullopt;
  }
  ids = (pr.size() == 1 && pr[0].is_array()) ? &pr[0] : &pr;
  if (ids->empty()) return bad_request("'prompt' must not be empty", "prompt");
  std::vector<int32_t> out;
  for (const json& t : *ids) {
    if (!t.is_number_integer()) return type_error("prompt", what);
    int64_t v = t.is_number_unsigned() ? int64_t(std::min<uint64_t>(t.get<uint64_t>(), uint64_t(1) << 40))
                                       : t.get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max())
      return bad_request("'prompt' token ids must be non-negative 32-bit integers", "prompt");
    out.push_back(static_cast<int32_t>(v));
  }
  gen->prompt_ids = std::move(out);
  return std::nullopt;
}

Err parse_stop(const json& j, GenerationRequest* gen) {
  if (!present(j, "stop")) return std::nullopt;
  const json& s = j["stop"];
  const char* what = "a string or a list of non-empty strings";
  if (s.is_string()) {
    if (s.get_ref<const std::string&>().empty()) return type_error("stop", what);
    gen->stop.push_back(s.get<std::string>());
    return std::nullopt;
  }
  if (!s.is_array()) return type_error("stop", what);
  for (const json& x : s) {
    if (!x.is_string() || x.get_ref<const std::string&>().empty()) return type_error("stop", what);
    gen->stop.push_back(x.get<std::string>());
  }
  return std::nullopt;
}

Err parse_sampling(const json& j, const ParseContext& ctx, ParsedRequest* out) {
  GenerationRequest& g = out->gen;
  if (Err e = get_bool(j, "stream", &out->stream)) return e;
  if (present(j, "stream_options")) {
    if (!j["stream_options"].is_object()) return type_error("stream_options", "an object");
    const json& so = j["stream_options"];
    if (present(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) return type_error("stream_options.include_usage", "a boolean");
      out->include_usage = so["include_usage"].get<bool>();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {  // the latter wins when both are given
    if (!present(j, key)) continue;
    int64_t v = 0;
    if (Err e = get_int(j, key, &v)) return e;
    if (v < 1)
      return bad_request(std::string("'") + key + "' must be at least 1, got " + std::to_string(v), key);
    if (v > std::numeric_limits<int32_t>::max())
      return bad_request(std::string("'") + key + "' is too large, got " + std::to_string(v), key);
    g.max_tokens = v;
  }
  if (present(j, "temperature")) {
    double t = 0;
    if (Err e = get_number(j, "temperature", &t)) return e;
    if (t < 0 || t > 100)
      return bad_request("'temperature' must be between 0 and 100, got " + num_str(t), "temperature");
    g.sampling.temperature = static_cast<float>(t);
    g.sampling_given.temperature = true;
  }
  if (present(j, "top_p")) {
    double p = 0;
    if (Err e = get_number(j, "top_p", &p)) return e;
    if (!(p > 0 && p <= 1)) return bad_request("'top_p' must be in (0, 1], got " + num_str(p), "top_p");
    g.sampling.top_p = static_cast<float>(p);
    g.sampling_given.top_p = true;
  }
  if (present(j, "top_k")) {
    int64_t k = 0;
    if (Err e = get_int(j, "top_k", &k)) return e;
    if (k < 0) return bad_request("'top_k' must be 0 (off) or positive, got " + std::to_string(k), "top_k");
    g.sampling.top_k = static_cast<int>(std::min<int64_t>(k, std::numeric_limits<int>::max()));
    g.sampling_given.top_k = true;
  }
  if (present(j, "seed")) {
    if (!j["seed"].is_number_integer()) return type_error("seed", "an integer");
    g.sampling.seed = j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>()
                                                     : static_cast<uint64_t>(j["seed"].get<int64_t>());
    g.sampling_given.seed = true;
  }
  if (Err e = parse_stop(j, &g)) return e;
  if (present(j, "n")) {
    int64_t n = 0;
    if (Err e = get_int(j, "n", &n)) return e;
    if (n != 1) return bad_request("only n=1 is supported, got n=" + std::to_string(n), "n");
  }
  if (present(j, "best_of")) {
    int64_t n = 0;
    if (Err e = get_int(j, "best_of", &n)) return e;
    if (n != 1) return bad_request("only best_of=1 is supported, got " + std::to_string(n), "best_of");
  }
  if (Err e = get_bool(j, "return_token_ids", &out->return_token_ids)) return e;
  if (Err e = get_bool(j, "ignore_eos", &g.ignore_eos)) return e;
  if (out->chat) {
    if (Err e = get_bool(j, "logprobs", &g.logprobs)) return e;
    if (present(j, "top_logprobs")) {
      int64_t n = 0;
      if (Err e = get_int(j, "top_logprobs", &n)) return e;
      if (n < 0 || n > 20)
        return bad_request("'top_logprobs' must be between 0 and 20, got " + std::to_string(n),
                           "top_logprobs");
      if (n > 0 && !g.logprobs)
        return bad_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
      g.top_logprobs = static_cast<int>(n);
    }
  } else {
    // Legacy completions: logprobs is the number of alternatives per position.
    if (present(j, "logprobs")) {
      int64_t n = 0;
      if (Err e = get_int(j, "logprobs", &n)) return e;
      if (n < 0 || n > 20)
        return bad_request("'logprobs' must be between 0 and 20, got " + std::to_string(n), "logprobs");
      g.logprobs = true;
      g.top_logprobs = static_cast<int>(n);
    }
    bool echo = false;
    if (Err e = get_bool(j, "echo", &echo)) return e;
    if (echo) return bad_request("'echo' is unsupported", "echo");
    if (present(j, "suffix")) return bad_request("'suffix' is unsupported", "suffix");
  }
  if (!g.sampling_given.temperature && ctx.default_temperature) {
    g.sampling.temperature = *ctx.default_temperature;
    g.sampling_given.temperature = true;
  }
  if (g.max_tokens == 0 && ctx.default_max_tokens) g.max_tokens = *ctx.default_max_tokens;
  return std::nullopt;
}

Expected<json> parse_body(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error("request body is not valid JSON");
  return j;
}

}  // namespace

std::optional<ApiError> parse_generation_request(std::string_view body, Endpoint endpoint,
                                                 const ParseContext& ctx, ParsedRequest* out) {
  auto parsed = parse_body(body);
  if (!parsed.ok()) return bad_request(parsed.error().message);
  json& j = *parsed;
  if (!j.is_object()) return bad_request("request body must be a JSON object");
  *out = ParsedRequest{};
  GenerationRequest& g = out->gen;
  if (Err e = parse_model(j, ctx)) return e;

  bool has_messages = j.contains("messages"), has_prompt = j.contains("prompt");
  if (endpoint == Endpoint::Chat && !has_messages) return bad_request("'messages' is required", "messages");
  if (endpoint == Endpoint::Completion && !has_prompt) return bad_request("'prompt' is required", "prompt");
  if (endpoint == Endpoint::Tokenize && has_messages == has_prompt)
    return bad_request("give exactly one of 'messages' or 'prompt'", has_messages ? "prompt" : "messages");
  out->chat = endpoint == Endpoint::Chat || (endpoint == Endpoint::Tokenize && has_messages);

  if (out->chat) {
    if (Err e = parse_messages(j["messages"], ctx, &g)) return e;
    g.messages = std::move(j["messages"]);
    if (present(j, "chat_template_kwargs")) {
      if (!j["chat_template_kwargs"].is_object()) return type_error("chat_template_kwargs", "an object");
      g.chat_template_kwargs = j["chat_template_kwargs"];
    }
    if (ctx.no_thinking && !g.chat_template_kwargs.contains("enable_thinking"))
      g.chat_template_kwargs["enable_thinking"] = false;
    if (present(j, "tools")) {
      if (!j["tools"].is_array()) return type_error("tools", "an array");
      g.tools = j["tools"];
    }
    if (Err e = get_bool(j, "add_generation_prompt", &g.add_generation_prompt)) return e;
  } else {
    if (Err e = parse_prompt(j, &g)) return e;
  }
  g.use_drafts = !ctx.no_drafts;
  if (endpoint == Endpoint::Tokenize) return std::nullopt;
  return parse_sampling(j, ctx, out);
}

std::optional<ApiError> parse_detokenize_request(std::string_view body, const ParseContext& ctx,
                                                 std::vector<int32_t>* ids) {
  auto parsed = parse_body(body);
  if (!parsed.ok()) return bad_request(parsed.error().message);
  const json& j = *parsed;
  if (!j.is_object()) return bad_request("request body must be a JSON object");
  if (Err e = parse_model(j, ctx)) return e;
  if (!j.contains("tokens") || !j["tokens"].is_array()) return type_error("tokens", "a list of token ids");
  ids->clear();
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer()) return type_error("tokens", "a list of token ids");
    if (t.is_number_unsigned()
            ? t.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
            : (t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()))
      return bad_request("'tokens' must hold non-negative 32-bit token ids", "tokens");
    ids->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

}  // namespace tf
