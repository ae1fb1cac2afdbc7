// OpenAI request bodies -> GenerationRequest, with every field type- and range-checked. A rejected
// request gets one ApiError (400, naming the param) and nothing reaches the engine.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/media.h"

namespace tf {

// What parsing needs to know about this server.
struct ParseContext {
  std::string served_name;                   // named in the unknown-model message
  std::vector<std::string> accepted_models;  // `model` must be one of these (or absent)
  bool vision = false;                       // image parts are refused when false
  bool no_thinking = false;  // --no-thinking: enable_thinking=false unless the request sets it
  bool no_drafts = false;
  std::optional<float> default_temperature;   // --temperature
  std::optional<int64_t> default_max_tokens;  // --max-tokens
  MediaPolicy media;
};

enum class Endpoint { Chat, Completion, Tokenize };

struct ParsedRequest {
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;
  bool return_token_ids = false;
  bool chat = true;  // messages (chat) or a prompt (completions)
};

// nullopt: *out holds the request. Tokenize accepts either messages or prompt and skips sampling.
std::optional<ApiError> parse_generation_request(std::string_view body, Endpoint endpoint,
                                                 const ParseContext& ctx, ParsedRequest* out);

// POST /v1/detokenize: {"tokens": [ids], "model"?}.
std::optional<ApiError> parse_detokenize_request(std::string_view body, const ParseContext& ctx,
                                                 std::vector<int32_t>* ids);

}  // namespace tf
