// `tensorfold bench`'s pure parts: SSE framing, reading a stream into a request record, error messages,
// percentiles, level summaries and their table/JSON, URLs, base64 and the request body.
#include <gtest/gtest.h>

#include <cmath>

#include "cli/bench_client.h"
#include "cli/bench_sse.h"
#include "cli/bench_stats.h"
#include "server/media.h"

namespace tf::cli::bench {
namespace {

using json = nlohmann::json;

TEST(BenchSse, EventsSplitAcrossReadsAndLineEndings) {
  SseParser p;
  std::vector<std::string> got;
  for (std::string_view piece : {"data: {\"a\":", "1}\n\nda", "ta: x\r", "\n\r\n: comment\n",
                                 "data:y\rdata: z\r\r", "event: e\nid: 3\ndata: [DONE]\n\n"}) {
    auto ev = p.feed(piece);
    got.insert(got.end(), ev.begin(), ev.end());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "x", "y\nz", "[DONE]"}));
  EXPECT_FALSE(p.flush());
}

TEST(BenchSse, UnterminatedLastEventIsFlushed) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: one\n\ndata: two").size() == 1);
  EXPECT_EQ(p.flush().value_or(""), "two");
  EXPECT_FALSE(p.flush());
}

TEST(BenchSse, BlankLinesWithoutDataDispatchNothing) {
  SseParser p;
  EXPECT_TRUE(p.feed("\n\n: keep-alive\n\nretry: 10\n\n").empty());
}

std::string chunk(const std::string& content) {
  return "data: " +
         json{{"choices", {{{"index", 0}, {"delta", {{"content", content}}}, {"finish_reason", nullptr}}}}}
             .dump() +
         "\n\n";
}
std::string finish_chunk() {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"usage\":null}\n\n";
}
std::string usage_chunk(int n) {
  return "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":" + std::to_string(n) +
         "}}\n\n";
}

TEST(BenchStream, TimingsAndUsageTokens) {
  StreamReader rd(10.0);
  rd.on_status(200);
  rd.on_bytes(chunk(""), 10.5);  // the role chunk vLLM sends before prefill: no output yet
  rd.on_bytes(chunk("He"), 11.0);
  rd.on_bytes(chunk("llo"), 11.25);
  rd.on_bytes(chunk(" w") + chunk("orld"), 11.75);
  rd.on_bytes(finish_chunk() + usage_chunk(7) + "data: [DONE]\n\n", 12.0);
  RequestRecord r = rd.finish(12.5, "", false);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.error, "");
  EXPECT_DOUBLE_EQ(r.ttft_s, 1.0);
  EXPECT_EQ(r.itl_s, (std::vector<double>{0.25, 0.5, 0.0}));
  EXPECT_DOUBLE_EQ(r.e2e_s, 2.5);
  EXPECT_EQ(r.chunk_tokens, 4);
  EXPECT_EQ(r.usage_tokens, 7);
  EXPECT_EQ(r.output_tokens(), 7);
  EXPECT_EQ(r.finish_reason, "length");
}

TEST(BenchStream, TokenIdsCountEvenWithoutText) {
  StreamReader rd(0);
  rd.on_status(200);
  rd.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\"\"},\"token_ids\":[5]}]}\n\n", 1);
  rd.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\"ab\"},\"token_ids\":[6,7]}]}\n\n", 2);
  rd.on_bytes("data: {\"choices\":[{\"text\":\"x\",\"finish_reason\":\"stop\"}]}\n\n",
              3);                             // completions shape
  RequestRecord r = rd.finish(3, "", false);  // no [DONE], but a finish_reason: complete
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.chunk_tokens, 4);
  EXPECT_EQ(r.usage_tokens, -1);
  EXPECT_EQ(r.output_tokens(), 4);
  EXPECT_DOUBLE_EQ(r.ttft_s, 1);
}

TEST(BenchStream, HttpErrorKeepsTheServersMessage) {
  StreamReader rd(0);
  rd.on_status(400);
  rd.on_bytes(R"({"error":{"message":"image inputs are unsupported:)", 0.1);
  rd.on_bytes(R"( start it with --vision","type":"invalid_request_error","param":null,"code":null}})", 0.1);
  RequestRecord r = rd.finish(0.2, "", false);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.aborted);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_EQ(r.error, "HTTP 400: image inputs are unsupported: start it with --vision");
  EXPECT_EQ(r.chunk_tokens, 0);
}

TEST(BenchStream, ErrorEventMidStreamIsAnError) {
  StreamReader rd(0);
  rd.on_status(200);
  rd.on_bytes(chunk("a") + "data: {\"error\":{\"message\":\"engine failed\"}}\n\ndata: [DONE]\n\n", 1);
  RequestRecord r = rd.finish(1, "", false);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "error event in the stream: engine failed");
  EXPECT_EQ(r.chunk_tokens, 1);
}

TEST(BenchStream, TruncatedMalformedAndTransportFailures) {
  {
    StreamReader rd(0);
    rd.on_status(200);
    rd.on_bytes(chunk("a"), 1);
    RequestRecord r = rd.finish(1, "", false);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "the stream ended without a finish_reason or [DONE]");
  }
  {
    StreamReader rd(0);
    rd.on_status(200);
    rd.on_bytes("data: {not json\n\ndata: [DONE]\n\n", 1);
    RequestRecord r = rd.finish(1, "", false);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "malformed stream event: {not json");
  }
  {
    StreamReader rd(0);
    RequestRecord r = rd.finish(1, "no complete answer: could not connect", false);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.http_status, 0);
    EXPECT_EQ(r.error, "no complete answer: could not connect");
  }
  {
    StreamReader rd(0);
    rd.on_status(200);
    rd.on_bytes(chunk("a"), 1);
    RequestRecord r = rd.finish(2, "", /*aborted=*/true);
    EXPECT_FALSE(r.ok);
    EXPECT_TRUE(r.aborted);
    EXPECT_EQ(r.error, "");
  }
}

TEST(BenchStream, HttpErrorMessageShapes) {
  EXPECT_EQ(http_error_message(503, R"({"error":"loading"})"), "HTTP 503: loading");
  EXPECT_EQ(http_error_message(422, R"({"detail":[{"msg":"bad"}]})"), R"(HTTP 422: [{"msg":"bad"}])");
  EXPECT_EQ(http_error_message(500, "Internal\nServer Error\n"), "HTTP 500: Internal Server Error");
  EXPECT_EQ(http_error_message(404, ""), "HTTP 404");
  std::string long_body(1000, 'x');
  EXPECT_EQ(http_error_message(400, long_body), "HTTP 400: " + std::string(300, 'x') + "...");
  EXPECT_EQ(one_line("\xC3\xA9\xC3\xA9", 3), "\xC3\xA9...");  // never cut inside a UTF-8 character
}

TEST(BenchStats, PercentilesInterpolateLikeNumpy) {
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_DOUBLE_EQ(percentile({3}, 99), 3);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);   // numpy.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);  // 1 + 0.99 * 3 = position 2.97
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 0), 10);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 100), 50);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 25), 20);
}

RequestRecord done(double ttft, double e2e, int64_t usage, std::vector<double> itl) {
  RequestRecord r;
  r.started = r.ok = true;
  r.http_status = 200;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.usage_tokens = usage;
  r.chunk_tokens = static_cast<int64_t>(itl.size()) + 1;
  r.itl_s = std::move(itl);
  return r;
}

TEST(BenchStats, SummaryCountsAddUp) {
  LevelResult lr;
  lr.concurrency = 4;
  lr.requests = 6;
  lr.wall_s = 2.0;
  lr.time_limit_s = 30;
  lr.records.push_back(done(0.1, 1.0, 10, {0.01, 0.03}));
  lr.records.push_back(done(0.3, 1.5, 20, {0.02}));
  RequestRecord bad;
  bad.started = true;
  bad.http_status = 400;
  bad.error = "HTTP 400: no";
  lr.records.push_back(bad);
  RequestRecord bad2 = bad;
  bad2.error = "HTTP 500: later";
  bad2.chunk_tokens = 3;
  lr.records.push_back(bad2);
  RequestRecord cut;
  cut.started = cut.aborted = true;
  cut.chunk_tokens = 5;
  cut.ttft_s = 0.5;  // its first token counts for TTFT; nothing else of it does
  lr.records.push_back(cut);
  lr.records.push_back(RequestRecord{});  // never sent
  LevelSummary s = summarize(lr);
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.sent, 5);
  EXPECT_EQ(s.done, 2);
  EXPECT_EQ(s.errors, 2);
  EXPECT_EQ(s.aborted, 1);
  EXPECT_EQ(s.not_sent, 1);
  EXPECT_EQ(s.done + s.errors + s.aborted + s.not_sent, s.requests);
  EXPECT_EQ(s.output_tokens, 10 + 20 + 3 + 5);
  EXPECT_EQ(s.tokens_from, "usage");
  EXPECT_DOUBLE_EQ(s.pages_per_s, 1.0);
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 19.0);
  EXPECT_DOUBLE_EQ(s.ttft_ms.p50, 300);
  EXPECT_DOUBLE_EQ(s.itl_ms.p50, 20);
  EXPECT_DOUBLE_EQ(s.e2e_s.p50, 1.25);
  EXPECT_NEAR(s.tpot_ms.p50, (900.0 / 9 + 1200.0 / 19) / 2, 1e-9);  // (E2E - TTFT) / (tokens - 1)
  EXPECT_EQ(s.first_error, "HTTP 400: no");
  EXPECT_TRUE(s.time_limited);

  std::string table = format_table({s});
  EXPECT_NE(table.find("| concurrency | requests | done | errors | pages/s |"), std::string::npos) << table;
  EXPECT_NE(table.find("|           4 |        6 |    2 |      2 |   1.000 |"), std::string::npos) << table;
  EXPECT_NE(table.find("concurrency 4: 2 of 5 requests failed; first: HTTP 400: no"), std::string::npos)
      << table;
  EXPECT_NE(table.find("time limit of 30 s reached: 1 requests cut while streaming, 1 never sent"),
            std::string::npos)
      << table;

  auto j = summary_json(s);
  EXPECT_EQ(j["done"], 2);
  EXPECT_EQ(j["errors"], 2);
  EXPECT_EQ(j["first_error"], "HTTP 400: no");
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["p50"].get<double>(), 300);
}

TEST(BenchStats, NoSamplesPrintDashesAndNulls) {
  LevelResult lr;
  lr.concurrency = 1;
  lr.requests = 1;
  lr.wall_s = 0.5;
  RequestRecord bad;
  bad.started = true;
  bad.error = "no complete answer: Connection";
  lr.records.push_back(bad);
  LevelSummary s = summarize(lr);
  EXPECT_EQ(s.errors, 1);
  EXPECT_NE(format_table({s}).find("|           - |"), std::string::npos) << format_table({s});
  auto j = summary_json(s);
  EXPECT_TRUE(j["ttft_ms"]["p50"].is_null());
  EXPECT_EQ(j.dump().find("NaN"), std::string::npos);
}

TEST(BenchClient, EndpointFromUrl) {
  auto e = parse_endpoint("http://127.0.0.1:8080");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->origin, "http://127.0.0.1:8080");
  EXPECT_EQ(e->chat_path, "/v1/chat/completions");
  EXPECT_EQ(e->models_path, "/v1/models");
  e = parse_endpoint("http://h:1/v1/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->chat_path, "/v1/chat/completions");
  e = parse_endpoint("HTTPS://h/proxy/v1/chat/completions");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->origin, "HTTPS://h");
  EXPECT_EQ(e->chat_path, "/proxy/v1/chat/completions");
  EXPECT_EQ(e->models_path, "/proxy/v1/models");
  EXPECT_FALSE(parse_endpoint("localhost:8080").ok());
  EXPECT_FALSE(parse_endpoint("http://").ok());
  EXPECT_FALSE(parse_endpoint("http://h/v1?x=1").ok());
}

TEST(BenchClient, Base64RoundTripsThroughTheServersDecoder) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  std::string all;
  for (int i = 0; i < 256 * 3 + 1; ++i) all += static_cast<char>(i * 7);
  auto back = base64_decode_strict(base64_encode(all));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::string(back->begin(), back->end()), all);
}

TEST(BenchClient, RequestBody) {
  auto url = image_data_url("dir/Page.PNG", "ab");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(*url, "data:image/png;base64,YWI=");
  EXPECT_EQ(*image_data_url("x.jpeg", ""), "data:image/jpeg;base64,");
  EXPECT_FALSE(image_data_url("notes.txt", "").ok());
  RequestOptions o;
  o.model = "m";
  o.max_tokens = 16;
  o.ignore_eos = true;
  json j = json::parse(request_body(o, *url));
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["max_tokens"], 16);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_FALSE(j.contains("temperature"));
  EXPECT_FALSE(j.contains("return_token_ids"));
  ASSERT_EQ(j["messages"][0]["content"].size(), 1u);
  EXPECT_EQ(j["messages"][0]["content"][0]["image_url"]["url"], *url);
  o.model.clear();
  o.prompt = "Transcribe.";
  o.token_ids = true;
  o.temperature = 0;
  j = json::parse(request_body(o, *url));
  EXPECT_FALSE(j.contains("model"));
  EXPECT_EQ(j["temperature"], 0.0);
  EXPECT_EQ(j["return_token_ids"], true);
  EXPECT_EQ(j["messages"][0]["content"][1]["text"], "Transcribe.");
}

}  // namespace
}  // namespace tf::cli::bench
