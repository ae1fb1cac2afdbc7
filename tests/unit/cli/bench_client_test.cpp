// `tensorfold bench`'s HTTP side over real sockets against tensorfold's own HttpServer with the fake
// engine (tests/unit/server): counts add up, N in flight, refusals are errors with the server's message,
// the time limit cuts silent and streaming requests, a port where nothing listens is a clear error.
#include <gtest/gtest.h>

#include "../server/test_server_util.h"
#include "cli/bench_client.h"

namespace tf::cli::bench {
namespace {

using tf::testing::TestServer;

// Enough of a PNG for the fake engine (it sniffs the signature); the server only checks base64.
std::vector<std::string> page_bodies(const RequestOptions& o) {
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(24, 'p');
  return {request_body(o, *image_data_url("page.png", png))};
}

Endpoint endpoint(int port) { return *parse_endpoint("http://127.0.0.1:" + std::to_string(port)); }

TEST(BenchLevel, CountsAddUpWithNInFlight) {
  TestServer s;
  s.engine->token_delay = std::chrono::milliseconds(2);
  auto model = probe_server(endpoint(s.port), "");
  ASSERT_TRUE(model.ok()) << model.error().message;
  RequestOptions ro;
  ro.model = *model;
  ro.max_tokens = 8;
  ro.ignore_eos = true;
  LevelOptions lo;
  lo.concurrency = 3;
  lo.requests = 7;
  Progress p;
  int ticks = 0;
  LevelResult lr = run_level(endpoint(s.port), page_bodies(ro), lo, p, [&](double) { ++ticks; });
  LevelSummary sum = summarize(lr);
  EXPECT_EQ(sum.requests, 7);
  EXPECT_EQ(sum.done, 7) << sum.first_error;
  EXPECT_EQ(sum.errors, 0);
  EXPECT_EQ(sum.aborted + sum.not_sent, 0);
  EXPECT_EQ(sum.output_tokens, 7 * 8);  // from the usage block
  EXPECT_EQ(sum.tokens_from, "usage");
  EXPECT_EQ(p.done.load(), 7);
  EXPECT_EQ(p.sent.load(), 7);
  EXPECT_GT(ticks, 0);
  for (const RequestRecord& r : lr.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_GE(r.ttft_s, 0);
    EXPECT_GE(r.e2e_s, r.ttft_s);
    EXPECT_GT(r.chunk_tokens, 0);
  }
  EXPECT_GT(sum.pages_per_s, 0);
  EXPECT_FALSE(std::isnan(sum.itl_ms.p99));
  auto sent = s.engine->submitted();
  ASSERT_EQ(sent.size(), 7u);
  EXPECT_EQ(sent[0].images.size(), 1u);
  EXPECT_TRUE(sent[0].ignore_eos);
}

TEST(BenchLevel, TokenIdsCountTokensWithoutText) {
  TestServer s;
  RequestOptions ro;
  ro.max_tokens = 6;
  ro.ignore_eos = true;
  ro.token_ids = true;
  LevelOptions lo;
  lo.requests = 2;
  Progress p;
  LevelResult lr = run_level(endpoint(s.port), page_bodies(ro), lo, p, nullptr);
  ASSERT_EQ(lr.records.size(), 2u);
  for (const RequestRecord& r : lr.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.chunk_tokens, 6);  // "Caf\xc3" ends in half a character: its chunk has ids, no text
    EXPECT_EQ(r.usage_tokens, 6);
  }
}

TEST(BenchLevel, RefusalsAreCountedWithTheServersMessage) {
  tf::ServeOptions text_only;  // no --vision: image requests get a 400
  TestServer s(text_only);
  RequestOptions ro;
  ro.max_tokens = 4;
  LevelOptions lo;
  lo.concurrency = 2;
  lo.requests = 3;
  Progress p;
  LevelSummary sum = summarize(run_level(endpoint(s.port), page_bodies(ro), lo, p, nullptr));
  EXPECT_EQ(sum.done, 0);
  EXPECT_EQ(sum.errors, 3);
  EXPECT_EQ(p.errors.load(), 3);
  EXPECT_EQ(sum.first_error.rfind("HTTP 400: image inputs are unsupported", 0), 0u) << sum.first_error;
}

TEST(BenchLevel, TimeLimitCutsSilentAndStreamingRequests) {
  for (bool silent : {true, false}) {
    TestServer s;
    if (silent)
      s.engine->prefill_delay = std::chrono::milliseconds(20000);  // nothing is sent before the first token
    else
      s.engine->token_delay = std::chrono::milliseconds(50);
    RequestOptions ro;
    ro.max_tokens = 1000;
    ro.ignore_eos = true;
    LevelOptions lo;
    lo.concurrency = 2;
    lo.requests = 5;
    lo.time_limit_s = 0.5;
    Progress p;
    LevelResult lr = run_level(endpoint(s.port), page_bodies(ro), lo, p, nullptr);
    LevelSummary sum = summarize(lr);
    EXPECT_LT(lr.wall_s, 5.0) << "silent=" << silent;
    EXPECT_EQ(sum.aborted, 2) << "silent=" << silent << " " << sum.first_error;
    EXPECT_EQ(sum.not_sent, 3);
    EXPECT_EQ(sum.errors, 0) << sum.first_error;
    EXPECT_TRUE(sum.time_limited);
    if (!silent) {
      EXPECT_GT(sum.output_tokens, 0);
    }
  }
}

TEST(BenchLevel, NothingListeningIsAClearError) {
  // A bound socket that does not listen: connections to it are refused, and no one else can take the port.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  Endpoint ep = endpoint(ntohs(a.sin_port));
  auto r = probe_server(ep, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "cannot reach " + ep.origin +
                                   ": could not connect (nothing listens there, or the host is unreachable)");
  auto w = wait_healthy(ep, 0.3);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("not ready after 0.3 s"), std::string::npos) << w.error().message;
  LevelOptions lo;
  lo.requests = 2;
  Progress p;
  LevelSummary sum = summarize(run_level(ep, page_bodies({}), lo, p, nullptr));
  EXPECT_EQ(sum.errors, 2);
  EXPECT_EQ(sum.first_error,
            "no complete answer: could not connect (nothing listens there, or the host is unreachable)");
  ::close(fd);
}

}  // namespace
}  // namespace tf::cli::bench
