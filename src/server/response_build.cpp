#include "server/response_build.h"

#include <algorithm>

#include "base/sha256.h"

namespace tf {
namespace {

using json = ordered_json;

json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json chat_logprobs(const std::vector<LogprobText>& lps) {
  json content = json::array();
  for (const LogprobText& e : lps) {
    json top = json::array();
    for (const auto& [tok, lp] : e.top)
      top.push_back(json{{"token", tok}, {"logprob", lp}, {"bytes", bytes_json(tok)}});
    content.push_back(json{{"token", e.token},
                           {"logprob", e.logprob},
                           {"bytes", bytes_json(e.token)},
                           {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

// Legacy completions shape: parallel arrays, top_logprobs as {token: logprob} maps.
json completion_logprobs(const std::vector<LogprobText>& lps, size_t text_offset0) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  size_t off = text_offset0;
  for (const LogprobText& e : lps) {
    tokens.push_back(e.token);
    token_lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [tok, lp] : e.top) top[tok] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(off);
    off += e.token.size();
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

}  // namespace

json usage_json(const Usage& u) {
  json j = json::object();
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = json{{"cached_tokens", u.cached_tokens}};
  // Draft decoding reported in OpenAI's predicted-outputs fields: accepted = draft tokens that were
  // verified and emitted, rejected = the other proposed drafts (runtime/drafts.h).
  j["completion_tokens_details"] =
      json{{"accepted_prediction_tokens", u.draft_accepted},
           {"rejected_prediction_tokens", std::max<int64_t>(0, u.draft_proposed - u.draft_accepted)}};
  return j;
}

json completion_json(const ResponseHeader& h, const CompletionResult& r) {
  json j = json::object();
  j["id"] = h.id;
  j["object"] = h.chat ? "chat.completion" : "text_completion";
  j["created"] = h.created;
  j["model"] = h.model;
  json choice = json::object();
  choice["index"] = 0;
  if (h.chat) {
    choice["message"] = json{{"role", "assistant"}, {"content", r.text}};
    choice["logprobs"] = h.logprobs ? chat_logprobs(r.logprobs) : json(nullptr);
  } else {
    choice["text"] = r.text;
    choice["logprobs"] = h.logprobs ? completion_logprobs(r.logprobs, 0) : json(nullptr);
  }
  choice["finish_reason"] = r.finish_reason;
  if (h.return_token_ids) {
    choice["token_ids"] = r.token_ids;
    choice["token_sha256"] = token_sha256(r.token_ids);
  }
  j["choices"] = json::array({std::move(choice)});
  j["usage"] = usage_json(r.usage);
  if (h.return_token_ids) j["prompt_token_ids"] = r.prompt_ids;
  return j;
}

std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

json StreamFormatter::chunk(json choice) const {
  json j = json::object();
  j["id"] = h_.id;
  j["object"] = h_.chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = h_.created;
  j["model"] = h_.model;
  j["choices"] = json::array({std::move(choice)});
  if (h_.include_usage) j["usage"] = nullptr;
  return j;
}

std::string StreamFormatter::start(const std::vector<int32_t>& prompt_ids) {
  if (!h_.chat) {
    pending_prompt_ids_ = prompt_ids;
    return "";
  }
  json choice{{"index", 0},
              {"delta", json{{"role", "assistant"}, {"content", ""}}},
              {"logprobs", nullptr},
              {"finish_reason", nullptr}};
  json j = chunk(std::move(choice));
  if (h_.return_token_ids) j["prompt_token_ids"] = prompt_ids;
  prompt_ids_sent_ = true;
  return sse_event(j);
}

std::string StreamFormatter::tokens(const std::string& text, const std::vector<int32_t>& ids,
                                    const std::vector<LogprobText>& lps) {
  json choice = json::object();
  choice["index"] = 0;
  if (h_.chat) {
    choice["delta"] = json{{"content", text}};
    choice["logprobs"] = h_.logprobs ? chat_logprobs(lps) : json(nullptr);
  } else {
    choice["text"] = text;
    choice["logprobs"] = h_.logprobs ? completion_logprobs(lps, 0) : json(nullptr);
  }
  choice["finish_reason"] = nullptr;
  if (h_.return_token_ids) choice["token_ids"] = ids;
  json j = chunk(std::move(choice));
  if (h_.return_token_ids && !prompt_ids_sent_) {
    j["prompt_token_ids"] = pending_prompt_ids_;
    prompt_ids_sent_ = true;
  }
  return sse_event(j);
}

std::string StreamFormatter::finish(const std::string& reason, const std::vector<int32_t>& all_ids) {
  json choice = json::object();
  choice["index"] = 0;
  if (h_.chat)
    choice["delta"] = json::object();
  else
    choice["text"] = "";
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = reason;
  if (h_.return_token_ids) {
    choice["token_ids"] = json::array();
    choice["token_sha256"] = token_sha256(all_ids);
  }
  json j = chunk(std::move(choice));
  if (h_.return_token_ids && !prompt_ids_sent_) {
    j["prompt_token_ids"] = pending_prompt_ids_;
    prompt_ids_sent_ = true;
  }
  return sse_event(j);
}

std::string StreamFormatter::usage(const Usage& u) {
  if (!h_.include_usage) return "";
  json j = json::object();
  j["id"] = h_.id;
  j["object"] = h_.chat ? "chat.completion.chunk" : "text_completion";
  j["created"] = h_.created;
  j["model"] = h_.model;
  j["choices"] = json::array();
  j["usage"] = usage_json(u);
  return sse_event(j);
}

}  // namespace tf
