// Device failure over HTTP: the server in front of an EngineGroup of two real CPU engines on a tiny
// checkpoint, engine 0 made to fail (test_hooks::fail_backend_op: a backend call throws DeviceError as a
// CUDA error does) while it streams a completion.
// - The stream that already sent tokens ends with an OpenAI error event (503's "engine_failed") and
//   [DONE], never with a finish_reason.
// - GET /health: 200 "degraded" with each engine's state (engine 0 "failed" with the error); /metrics
//   names the failed engine; the next requests are served (by engine 1).
// - Once engine 1 fails too: the failing request gets a 503 JSON error, /health answers 503 "failed" and
//   new requests a 503 naming the failure.
// This file sorts after serve_run_test.cpp on purpose: ServeRun forks, and in a child of a process whose
// CPU thread pool has started (the engines here start it) the pool has no threads. (ctest runs each test
// in its own process anyway.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "backend/test_hooks.h"
#include "runtime/engine.h"
#include "runtime/engine_group.h"
#include "test_server_util.h"

namespace tf::testing {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<Engine> tiny_engine() {
  EngineOptions o;
  o.checkpoint = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/lighton_ocr-tiny-bf16";
  o.name = "tiny";
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::shared_ptr<Engine>(std::move(e).value()) : nullptr;
}

// The "data: " payloads in a raw HTTP/1.1 chunked response (each SSE event is one chunk).
std::vector<std::string> raw_sse_payloads(const std::string& raw) {
  std::vector<std::string> out;
  for (size_t at = raw.find("data: "); at != std::string::npos; at = raw.find("data: ", at)) {
    const size_t end = raw.find("\n\n", at);
    if (end == std::string::npos) break;
    out.push_back(raw.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

TEST(EngineFailureHttp, AStreamEndsWithAnErrorEventAndTheOtherEngineServes) {
  auto e0 = tiny_engine(), e1 = tiny_engine();
  ASSERT_TRUE(e0 && e1);
  ServeOptions o;
  o.checkpoint = "/ckpt/tiny";
  o.name = "tiny";
  o.host = "127.0.0.1";
  o.port = 0;
  HttpServer server(o);
  auto port = server.bind();
  ASSERT_TRUE(port.ok());
  server.set_engine(std::make_shared<EngineGroup>(std::vector<std::shared_ptr<EngineApi>>{e0, e1}));
  std::thread running([&] { server.run(); });
  struct Stop {
    HttpServer& s;
    std::thread& t;
    ~Stop() {
      s.stop();
      t.join();
    }
  } stop{server, running};
  httplib::Client c("127.0.0.1", *port);
  c.set_read_timeout(60, 0);
  ASSERT_TRUE(wait_for([&] { return static_cast<bool>(c.Get("/health")); }));
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  EXPECT_EQ(json::parse(h->body)["engines"].size(), 2u);

  // Both idle: the stream goes to engine 0, which fails once the first token is out.
  const int fd = raw_connect(*port);
  ASSERT_GE(fd, 0);
  send_all(
      fd, raw_post("/v1/completions",
                   R"({"prompt":"hello","max_tokens":400,"ignore_eos":true,"temperature":0,"stream":true})"));
  std::string got = recv_until(fd, "data: ", 60000);
  ASSERT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
  test_hooks::fail_backend_op(e0->backend(), 1);
  got += recv_until(fd, "data: [DONE]", 60000);
  ::close(fd);
  const std::vector<std::string> ev = raw_sse_payloads(got);
  ASSERT_GE(ev.size(), 3u) << got;
  EXPECT_EQ(ev.back(), "[DONE]");
  const json err = json::parse(ev[ev.size() - 2]);
  ASSERT_TRUE(err.contains("error")) << err;
  EXPECT_EQ(err["error"]["code"], "engine_failed");
  EXPECT_EQ(err["error"]["type"], "server_error");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("the engine on cpu failed"), std::string::npos);
  size_t texts = 0;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    const json chunk = json::parse(ev[i]);
    ASSERT_TRUE(chunk.contains("choices")) << chunk;
    for (const json& ch : chunk["choices"]) {
      EXPECT_TRUE(ch["finish_reason"].is_null()) << "a failed stream must not finish: " << chunk;
      texts += ch.contains("text");
    }
  }
  EXPECT_GE(texts, 1u) << "the failure came after tokens were sent";

  h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200) << "engine 1 still serves";
  json hb = json::parse(h->body);
  EXPECT_EQ(hb["status"], "degraded");
  ASSERT_EQ(hb["engines"].size(), 2u);
  EXPECT_EQ(hb["engines"][0]["status"], "failed");
  EXPECT_NE(hb["engines"][0]["error"].get<std::string>().find("injected device fault"), std::string::npos);
  EXPECT_EQ(hb["engines"][1]["status"], "ok");
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("\ntensorfold_engine_failed{engine=\"0\"} 1\n"), std::string::npos);
  EXPECT_NE(m->body.find("\ntensorfold_engine_failed{engine=\"1\"} 0\n"), std::string::npos);
  EXPECT_NE(m->body.find("\ntensorfold_engine_failed_requests_total{engine=\"0\"} 1\n"), std::string::npos);
  const std::string body = R"({"prompt":"hello","max_tokens":4,"ignore_eos":true,"temperature":0})";
  for (int i = 0; i < 3; ++i) {
    auto ok = c.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(json::parse(ok->body)["usage"]["completion_tokens"], 4);
  }

  // Engine 1 fails too: its request gets a 503, and with no engine left the server is not healthy.
  test_hooks::fail_backend_op(e1->backend(), 1);
  auto failed = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 503) << failed->body;
  EXPECT_EQ(json::parse(failed->body)["error"]["code"], "engine_failed");
  EXPECT_FALSE(failed->get_header_value("Retry-After").empty());
  h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  hb = json::parse(h->body);
  EXPECT_EQ(hb["status"], "failed");
  EXPECT_EQ(hb["engines"][1]["status"], "failed");
  auto refused = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(json::parse(refused->body)["error"]["code"], "engine_failed");
  EXPECT_NE(json::parse(refused->body)["error"]["message"].get<std::string>().find("no engine is serving"),
            std::string::npos)
      << refused->body;
}

}  // namespace
}  // namespace tf::testing
