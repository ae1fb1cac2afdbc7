// The routes over real HTTP (in-process httplib client) against the fake engine: response shapes,
// error shapes and statuses, auth, limits, health while loading, metrics.
#include <gtest/gtest.h>

#include "base/sha256.h"
#include "test_server_util.h"

namespace tf::testing {
namespace {

using json = nlohmann::ordered_json;

const std::string kChat = R"({"model":"tiny","messages":[{"role":"user","content":"hello"}]})";

void expect_error(const httplib::Result& r, int status, const std::string& message,
                  const json& param = nullptr, const json& code = nullptr) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  json j = json::parse(r->body);
  ASSERT_EQ(j.size(), 1u);
  const json& e = j["error"];
  ASSERT_EQ(e.size(), 4u) << r->body;  // exactly message, type, param, code
  EXPECT_EQ(e["message"], message);
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_EQ(e["param"], param);
  EXPECT_EQ(e["code"], code);
}

TEST(Http, ChatNonStreamShape) {
  TestServer s;
  auto r =
      s.post("/v1/chat/completions",
             R"({"model":"tiny","messages":[{"role":"user","content":"hello"}],"return_token_ids":true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], kReply);
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_TRUE(c["logprobs"].is_null());
  std::vector<int32_t> ids(kReply.begin(), kReply.end());
  for (auto& id : ids) id &= 0xff;
  EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(c["token_sha256"], token_sha256(ids));
  std::string prompt = FakeEngine::render(json::parse(kChat)["messages"]);
  EXPECT_EQ(j["prompt_token_ids"].size(), prompt.size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], kReply.size());
  EXPECT_EQ(j["usage"]["total_tokens"], prompt.size() + kReply.size());
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST(Http, LengthAndLogprobs) {
  TestServer s;
  auto r = s.post(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":3,"logprobs":true,"top_logprobs":2})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json c = json::parse(r->body)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(c["message"]["content"], "Caf");
  const json& lp = c["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  EXPECT_EQ(lp[0]["token"], "C");
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(lp[0]["bytes"], json::array({67}));
  ASSERT_EQ(lp[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp[1]["top_logprobs"][1]["token"], "b");  // 'a' + 1
  // The request reached the engine with the sampling fields it asked for.
  auto sub = s.engine->submitted();
  ASSERT_EQ(sub.size(), 1u);
  EXPECT_EQ(sub[0].max_tokens, 3);
  EXPECT_EQ(sub[0].top_logprobs, 2);
}

TEST(Http, CompletionsNonStream) {
  TestServer s;
  auto r = s.post("/v1/completions", R"({"model":"tiny","prompt":[104,105],"max_tokens":4})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], "Caf");  // 4 tokens: "Caf" + half of the 'é'
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
}

TEST(Http, ErrorShapesAndStatuses) {
  TestServer s;
  expect_error(s.post("/v1/chat/completions", "{not json"), 400, "request body is not valid JSON");
  expect_error(s.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":3})"), 400,
               "only n=1 is supported, got n=3", "n");
  expect_error(
      s.post("/v1/chat/completions", R"({"model":"big","messages":[{"role":"user","content":"x"}]})"), 404,
      "model 'big' is not served here; this server serves 'tiny'", "model", "model_not_found");
  expect_error(
      s.post("/v1/chat/completions",
             R"({"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]})"),
      400, "content parts must be text or image_url; audio and video inputs are unsupported",
      "messages[0].content[0].type");
  // Refused by the engine before any token: forwarded with its status and code.
  expect_error(
      s.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":5000})"),
      400, "prompt (7 tokens) + max_tokens (5000) exceeds the context length (4096)", nullptr,
      "context_length_exceeded");
  expect_error(
      s.post(
          "/v1/chat/completions",
          R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAAAAAA"}}]}]})"),
      400, "image 1 is not PNG, JPEG or WebP; send one of those");
  auto nf = s.client().Get("/v2/nothing");
  expect_error(nf, 404, "no route for GET /v2/nothing");
  // Every refusal above left the server working.
  auto ok = s.post("/v1/chat/completions", kChat);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Http, WithoutVisionFlagImagesAreRefused) {
  ServeOptions o;  // no --vision, although the engine has an image tower
  TestServer s(o);
  ASSERT_TRUE(s.engine->vision);
  expect_error(
      s.post(
          "/v1/chat/completions",
          R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAAAAAA"}}]}]})"),
      400,
      "image inputs are unsupported: this server runs without a vision encoder (start it with --vision on a "
      "vision checkpoint)",
      "messages[0].content[0]");
  auto ok = s.post("/v1/chat/completions", kChat);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Http, BodyOverLimitIs413) {
  ServeOptions o;
  o.max_body_mb = 1;
  TestServer s(o);
  std::string big = R"({"messages":[{"role":"user","content":")" + std::string(1100000, 'a') + "\"}]}";
  int fd = raw_connect(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, raw_post("/v1/chat/completions", big));
  std::string resp = recv_until(fd, "}}");
  ::close(fd);
  EXPECT_EQ(resp.rfind("HTTP/1.1 413", 0), 0u) << resp.substr(0, 200);
  std::string body = resp.substr(resp.find("\r\n\r\n") + 4);
  json j = json::parse(body);
  EXPECT_EQ(j["error"]["message"], "request body is larger than the server's limit of 1 MiB (--max-body-mb)");
  EXPECT_EQ(j["error"]["code"], "request_too_large");
  auto ok = s.post("/v1/chat/completions", kChat);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(Http, ApiKey) {
  ServeOptions o;
  o.api_key = "sk-test";
  TestServer s(o);
  expect_error(s.post("/v1/chat/completions", kChat), 401,
               "missing or wrong API key; send 'Authorization: Bearer KEY'", nullptr, "invalid_api_key");
  expect_error(s.post("/v1/chat/completions", kChat, {{"Authorization", "Bearer sk-wrong"}}), 401,
               "missing or wrong API key; send 'Authorization: Bearer KEY'", nullptr, "invalid_api_key");
  auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  auto ok = s.post("/v1/chat/completions", kChat, {{"Authorization", "Bearer sk-test"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto health = s.client().Get("/health");  // probes need no key
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Http, HealthWhileLoading) {
  TestServer none({}, /*with_engine=*/false);
  auto h = none.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body)["status"], "loading");
  expect_error(none.post("/v1/chat/completions", kChat), 503,
               "the model is still loading; retry when GET /health answers 200");
  auto models = none.client().Get("/v1/models");  // known before the engine is
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "tiny");

  TestServer s;
  s.engine->is_ready = false;
  h = s.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  s.engine->is_ready = true;
  h = s.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
}

TEST(Http, ModelsTokenizeDetokenize) {
  ServeOptions o;
  o.name = "ocr-model";
  TestServer s(o);
  auto m = s.client().Get("/v1/models");
  ASSERT_TRUE(m);
  json j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "ocr-model");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 4096);

  auto t = s.post("/v1/tokenize", R"({"model":"ocr-model","prompt":"hi!"})");
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  json tj = json::parse(t->body);
  EXPECT_EQ(tj["tokens"], json::array({104, 105, 33}));
  EXPECT_EQ(tj["count"], 3);
  EXPECT_EQ(tj["token_sha256"], sha256_hex("104,105,33"));
  auto tm = s.post("/v1/tokenize", R"({"messages":[{"role":"user","content":"a"}]})");
  ASSERT_TRUE(tm);
  EXPECT_EQ(json::parse(tm->body)["count"], 7);  // "user:a\n"

  auto d = s.post("/v1/detokenize", R"({"tokens":[104,105]})");
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["prompt"], "hi");
  expect_error(s.post("/v1/detokenize", R"({"tokens":[104,999]})"), 400,
               "token id 999 is outside the vocabulary (256)", "tokens");
  expect_error(s.post("/v1/tokenize", R"({"model":"tiny","prompt":"x"})"), 404,
               "model 'tiny' is not served here; this server serves 'ocr-model'", "model", "model_not_found");
}

// OpenAI and vLLM answer an unknown model with 404 model_not_found on every route that takes `model`.
TEST(Http, UnknownModelIs404OnEveryRoute) {
  TestServer s;
  const std::string msg = "model 'gpt-4o' is not served here; this server serves 'tiny'";
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"/v1/chat/completions", R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})"},
      {"/v1/chat/completions",
       R"({"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"x"}]})"},
      {"/v1/completions", R"({"model":"gpt-4o","prompt":"x"})"},
      {"/v1/tokenize", R"({"model":"gpt-4o","prompt":"x"})"},
      {"/v1/tokenize", R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})"},
      {"/v1/detokenize", R"({"model":"gpt-4o","tokens":[104]})"},
  };
  for (const auto& [path, body] : routes) {
    SCOPED_TRACE(path + " " + body);
    auto r = s.post(path, body);
    expect_error(r, 404, msg, "model", "model_not_found");
    if (r) {
      EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
    }
  }
}

TEST(Http, Metrics) {
  TestServer s;
  s.post("/v1/chat/completions", kChat);
  s.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2})");
  s.post("/v1/chat/completions", "{");
  // Responses are counted just after they are written, so the client may be a moment ahead.
  ASSERT_TRUE(wait_for([&] {
    return s.server->metrics().responses("/v1/chat/completions", 400) == 1 &&
           s.server->metrics().responses("/v1/chat/completions", 200) == 2;
  }));
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  const std::string& t = m->body;
  EXPECT_NE(t.find("tensorfold_fake_engine_up 1\n"), std::string::npos);
  EXPECT_NE(t.find("tensorfold_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("tensorfold_http_requests_total{route=\"/v1/chat/completions\",status=\"400\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("tensorfold_http_finished_total{reason=\"stop\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tensorfold_http_finished_total{reason=\"length\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace tf::testing
