// `tensorfold bench`: the HTTP side. Where to send (URL -> endpoint paths), what to send (a chat
// completion holding one page as a data: URL, streamed with usage), and a concurrency level run with
// N requests in flight over keep-alive connections (cpp-httplib, one client per connection).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cli/bench_stats.h"

namespace tf::cli::bench {

struct Endpoint {
  std::string origin;       // scheme://host[:port]
  std::string chat_path;    // e.g. /v1/chat/completions
  std::string models_path;  // e.g. /v1/models
};

// Accepts http(s)://host[:port] with an optional path: none or "/" -> /v1/chat/completions; a path
// ending in /chat/completions is used as given; any other path is a base URL as OpenAI clients take it
// (".../v1" -> .../v1/chat/completions, .../v1/models).
Expected<Endpoint> parse_endpoint(const std::string& url);

std::string base64_encode(std::string_view bytes);

// data:image/png;base64,... with the MIME type taken from the file name's extension (png, jpg/jpeg,
// webp, gif, bmp); an error for other names.
Expected<std::string> image_data_url(const std::string& file_name, std::string_view bytes);

struct RequestOptions {
  std::string model;   // empty: the field is left out
  std::string prompt;  // empty: the image alone
  int64_t max_tokens = 1000;
  bool ignore_eos = false;
  bool token_ids = false;   // "return_token_ids": exact token counts even for ids that complete no text
  double temperature = -1;  // < 0: left out (the server's default)
};

// The JSON body of one streamed chat completion with the page as an image_url part.
std::string request_body(const RequestOptions& o, const std::string& data_url);

// Live counters of the running level, read by the progress line.
struct Progress {
  std::atomic<int64_t> sent{0}, done{0}, errors{0}, tokens{0};
};

struct LevelOptions {
  int concurrency = 1;
  int64_t requests = 1;
  double time_limit_s = 0;         // 0: none; else no request starts after it and streaming ones are cut
  double request_timeout_s = 600;  // per read
  std::string api_key;             // empty: no Authorization header
};

// Runs `requests` requests, bodies[i % bodies.size()] for the i-th, with `concurrency` in flight;
// calls tick(seconds so far) about every 50 ms from the calling thread while they run.
LevelResult run_level(const Endpoint& ep, const std::vector<std::string>& bodies, const LevelOptions& o,
                      Progress& progress, const std::function<void(double)>& tick);

// GET models_path: the first model id it lists ("" when the server answers without one, e.g. 404).
// An error (one line, naming the URL) when nothing answers.
Expected<std::string> probe_server(const Endpoint& ep, const std::string& api_key);

// Polls origin/health until it answers 200 (or 404: a server without that route) or wait_s pass.
Status wait_healthy(const Endpoint& ep, double wait_s);

}  // namespace tf::cli::bench
