// OpenAI response bodies: the non-streaming JSON and the SSE chunks of a stream.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine_api.h"
#include "server/api_error.h"

namespace tf {

// One output position's logprob, with token texts already resolved.
struct LogprobText {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

struct ResponseHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
  bool chat = true;
  bool return_token_ids = false;
  bool logprobs = false;
  bool include_usage = false;  // streams only
};

struct CompletionResult {
  std::string text;
  std::string finish_reason;
  Usage usage;
  std::vector<int32_t> prompt_ids, token_ids;
  std::vector<LogprobText> logprobs;
};

ordered_json usage_json(const Usage& u);
ordered_json completion_json(const ResponseHeader& h, const CompletionResult& r);

// "data: <json>\n\n"
std::string sse_event(const ordered_json& j);
inline std::string sse_done() { return "data: [DONE]\n\n"; }

// Builds a stream's chunks in order: start (chat: the role), tokens, finish, usage, [DONE].
class StreamFormatter {
 public:
  explicit StreamFormatter(ResponseHeader h) : h_(std::move(h)) {}
  // Chat: the first chunk with delta.role; with return_token_ids it carries prompt_token_ids.
  // Completions: empty (prompt_token_ids ride on the first token chunk).
  std::string start(const std::vector<int32_t>& prompt_ids);
  std::string tokens(const std::string& text, const std::vector<int32_t>& ids,
                     const std::vector<LogprobText>& lps);
  std::string finish(const std::string& reason, const std::vector<int32_t>& all_ids);
  std::string usage(const Usage& u);  // empty unless include_usage
  std::string error(const ApiError& e) const { return sse_event(error_json(e)); }

 private:
  ordered_json chunk(ordered_json choice) const;
  ResponseHeader h_;
  std::vector<int32_t> pending_prompt_ids_;
  bool prompt_ids_sent_ = false;
};

}  // namespace tf
