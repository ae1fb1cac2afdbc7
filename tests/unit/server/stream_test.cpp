// Streaming (SSE framing, chunk order, usage, errors before the first token) and cancellation:
// a client that leaves mid-stream, during prefill, or while waiting for a JSON answer.
#include <gtest/gtest.h>

#include "base/sha256.h"
#include "test_server_util.h"

namespace tf::testing {
namespace {

using json = nlohmann::ordered_json;

TEST(Stream, ChatChunksUsageAndDone) {
  TestServer s;
  auto r = s.post("/v1/chat/completions",
                  R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,)"
                  R"("stream_options":{"include_usage":true},"return_token_ids":true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  auto ev = sse_payloads(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev.back(), "[DONE]");
  json first = json::parse(ev[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first.contains("usage") && first["usage"].is_null());
  EXPECT_EQ(first["prompt_token_ids"].size(), std::string("user:hi\n").size());
  std::string text;
  std::vector<int32_t> ids;
  std::string id = first["id"];
  size_t finish_at = 0;
  for (size_t i = 1; i + 1 < ev.size(); ++i) {
    json c = json::parse(ev[i]);
    EXPECT_EQ(c["id"], id);
    if (c["choices"].empty()) {  // the usage chunk comes after the finish chunk
      EXPECT_GT(finish_at, 0u);
      EXPECT_EQ(i, ev.size() - 2);
      EXPECT_EQ(c["usage"]["completion_tokens"], kReply.size());
      EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
      continue;
    }
    const json& ch = c["choices"][0];
    if (!ch["finish_reason"].is_null()) {
      EXPECT_EQ(ch["finish_reason"], "stop");
      EXPECT_EQ(ch["token_sha256"], token_sha256(ids));
      finish_at = i;
      continue;
    }
    text += ch["delta"]["content"].get<std::string>();
    for (int32_t t : ch["token_ids"]) ids.push_back(t);
  }
  EXPECT_EQ(text, kReply);
  EXPECT_EQ(ids.size(), kReply.size());
  EXPECT_EQ(finish_at, ev.size() - 3);
}

TEST(Stream, SplitCharacterIsNotSentHalfWithoutUsageChunk) {
  TestServer s;
  auto r = s.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"stream":true})");
  ASSERT_TRUE(r);
  auto ev = sse_payloads(r->body);
  std::string text;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    json c = json::parse(ev[i]);
    EXPECT_FALSE(c.contains("usage"));
    ASSERT_EQ(c["choices"].size(), 1u);
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) {
      std::string piece = d["content"];
      EXPECT_TRUE(i == 0 || !piece.empty()) << "empty content chunk " << i;
      text += piece;
    }
  }
  EXPECT_EQ(text, kReply);
  // role chunk + one chunk per character (é and î are 2 tokens, 1 chunk) + finish + [DONE]
  EXPECT_EQ(ev.size(), 1 + (kReply.size() - 2) + 1 + 1);
}

TEST(Stream, Completions) {
  TestServer s;
  auto r = s.post("/v1/completions", R"({"prompt":"hi","stream":true,"max_tokens":3})");
  ASSERT_TRUE(r);
  auto ev = sse_payloads(r->body);
  ASSERT_EQ(ev.size(), 5u);  // C, a, f, finish, [DONE]
  json c = json::parse(ev[0]);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "C");
  EXPECT_EQ(json::parse(ev[3])["choices"][0]["finish_reason"], "length");
}

TEST(Stream, ErrorBeforeFirstTokenKeepsItsStatus) {
  TestServer s;
  auto r = s.post("/v1/chat/completions",
                  R"({"stream":true,"messages":[{"role":"user","content":[{"type":"image_url",)"
                  R"("image_url":{"url":"data:image/png;base64,iVBORw=="}}]}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["message"], "image 1 could not be decoded; send PNG, JPEG or WebP");
  r = s.post("/v1/chat/completions",
             R"({"stream":true,"max_tokens":9999,"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
}

TEST(Cancel, ClientLeavesMidStream) {
  TestServer s;
  s.engine->token_delay = std::chrono::milliseconds(30);
  int fd = raw_connect(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd,
           raw_post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":true})"));
  std::string got = recv_until(fd, "\"content\":\"f\"");  // the 3rd token arrived
  ASSERT_NE(got.find("\"content\":\"f\""), std::string::npos) << got;
  ::close(fd);
  EXPECT_TRUE(wait_for([&] { return s.engine->cancels_seen() == 1; }));
  EXPECT_EQ(s.engine->finished(), 0);
  EXPECT_TRUE(wait_for([&] { return s.server->metrics().finishes("client-left") == 1; }));
  // The next request is unaffected.
  auto ok = s.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(ok);
  EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], kReply);
}

TEST(Cancel, ClientLeavesDuringPrefill) {
  TestServer s;
  s.engine->prefill_delay = std::chrono::milliseconds(3000);
  int fd = raw_connect(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd,
           raw_post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"stream":true})"));
  ASSERT_TRUE(wait_for([&] { return s.engine->submitted().size() == 1; }));
  auto t0 = std::chrono::steady_clock::now();
  ::close(fd);
  EXPECT_TRUE(wait_for([&] { return s.engine->cancels_seen() == 1; }, 2000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
}

TEST(Cancel, ClientLeavesNonStreamRequest) {
  TestServer s;
  s.engine->token_delay = std::chrono::milliseconds(50);
  int fd = raw_connect(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, raw_post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(wait_for([&] { return s.engine->submitted().size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  ::close(fd);
  EXPECT_TRUE(wait_for([&] { return s.engine->cancels_seen() == 1; }, 2000));
  EXPECT_EQ(s.engine->finished(), 0);
}

// Tokens arriving faster than the 50 ms poll interval: the handler's wait never times out, so the
// client and the shutdown flag must be checked between events (they once were only on a timeout).
TEST(Cancel, ClientLeavesNonStreamRequestWhileTokensFlowFast) {
  TestServer s;
  s.engine->token_delay = std::chrono::milliseconds(5);
  s.engine->reply = std::string(2000, 'a');  // 10 s of tokens
  int fd = raw_connect(s.port);
  ASSERT_GE(fd, 0);
  send_all(fd, raw_post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(wait_for([&] { return s.engine->submitted().size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::close(fd);
  EXPECT_TRUE(wait_for([&] { return s.engine->cancels_seen() == 1; }, 2000));
  EXPECT_EQ(s.engine->finished(), 0);
}

TEST(Cancel, StopCancelsRequestsInFlightWhileTokensFlowFast) {
  auto s = std::make_unique<TestServer>();
  s->engine->token_delay = std::chrono::milliseconds(5);
  s->engine->reply = std::string(2000, 'a');
  int status = 0;
  std::string body;
  std::thread client([&] {
    auto r = s->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})");
    if (r) status = r->status, body = r->body;
  });
  ASSERT_TRUE(wait_for([&] { return s->engine->submitted().size() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto engine = s->engine;
  auto t0 = std::chrono::steady_clock::now();
  s.reset();
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3000));
  EXPECT_EQ(status, 503);
  EXPECT_EQ(engine->finished(), 0);
}

TEST(Cancel, StopCancelsRequestsInFlight) {
  auto s = std::make_unique<TestServer>();
  s->engine->token_delay = std::chrono::milliseconds(100);
  int status = 0;
  std::string body;
  std::thread client([&] {
    auto r = s->post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})");
    if (r) status = r->status, body = r->body;
  });
  ASSERT_TRUE(wait_for([&] { return s->engine->submitted().size() == 1; }));
  auto engine = s->engine;
  s.reset();  // stop() + join: returns only after the handler answered
  client.join();
  EXPECT_TRUE(wait_for([&] { return engine->cancels_seen() == 1; }));
  EXPECT_EQ(status, 503);
  EXPECT_EQ(json::parse(body)["error"]["message"], "the server is shutting down");
}

}  // namespace
}  // namespace tf::testing
