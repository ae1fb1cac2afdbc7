#include "cli/bench_client.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

namespace tf::cli::bench {

using json = nlohmann::ordered_json;

Expected<Endpoint> parse_endpoint(const std::string& url) {
  size_t scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (scheme != "http" && scheme != "https")
    return make_error("the URL must start with http:// or https://, got '" + one_line(url, 100) + "'");
  size_t path_start = url.find('/', scheme_end + 3);
  Endpoint ep;
  ep.origin = url.substr(0, path_start);
  if (ep.origin.size() <= scheme_end + 3)
    return make_error("the URL names no host: '" + one_line(url, 100) + "'");
  std::string path = path_start == std::string::npos ? "" : url.substr(path_start);
  if (path.find_first_of("?#") != std::string::npos)
    return make_error("the URL must not hold a query or fragment");
  while (!path.empty() && path.back() == '/') path.pop_back();
  const std::string kChat = "/chat/completions";
  if (path.empty()) path = "/v1";  // the OpenAI base URL of a server root
  if (path.size() >= kChat.size() && path.compare(path.size() - kChat.size(), kChat.size(), kChat) == 0)
    path.resize(path.size() - kChat.size());
  ep.chat_path = path + kChat;
  ep.models_path = path + "/models";
  return ep;
}

std::string base64_encode(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Expected<std::string> image_data_url(const std::string& file_name, std::string_view bytes) {
  size_t dot = file_name.rfind('.');
  std::string ext = dot == std::string::npos ? "" : file_name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string mime = ext == "png"                    ? "image/png"
                     : ext == "jpg" || ext == "jpeg" ? "image/jpeg"
                     : ext == "webp"                 ? "image/webp"
                     : ext == "gif"                  ? "image/gif"
                     : ext == "bmp"                  ? "image/bmp"
                                                     : "";
  if (mime.empty()) return make_error(file_name + ": not an image name (png, jpg, jpeg, webp, gif, bmp)");
  return "data:" + mime + ";base64," + base64_encode(bytes);
}

std::string request_body(const RequestOptions& o, const std::string& data_url) {
  json content = json::array();
  content.push_back({{"type", "image_url"}, {"image_url", {{"url", data_url}}}});
  if (!o.prompt.empty()) content.push_back({{"type", "text"}, {"text", o.prompt}});
  json j;
  if (!o.model.empty()) j["model"] = o.model;
  j["messages"] = json::array({json{{"role", "user"}, {"content", std::move(content)}}});
  j["max_tokens"] = o.max_tokens;
  if (o.temperature >= 0) j["temperature"] = o.temperature;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) j["ignore_eos"] = true;
  if (o.token_ids) j["return_token_ids"] = true;
  return j.dump();
}

namespace {

using Clock = std::chrono::steady_clock;

void set_timeout(httplib::Client& cli, double seconds, bool read) {
  auto sec = static_cast<time_t>(seconds);
  auto usec = static_cast<time_t>((seconds - static_cast<double>(sec)) * 1e6);
  if (read)
    cli.set_read_timeout(sec, usec);
  else
    cli.set_connection_timeout(sec, usec);
}

// cpp-httplib 0.11 names its errors in one word ("Connection", "Read"); say what happened.
std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "could not connect (nothing listens there, or the host is unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "the connection timed out";
    case httplib::Error::Read:
      return "the connection closed or went silent past --timeout while reading the answer";
    case httplib::Error::Write:
      return "the connection closed while sending the request";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return "TLS failed (" + httplib::to_string(e) + ")";
    default:
      return httplib::to_string(e);
  }
}

httplib::Headers auth_headers(const std::string& api_key) {
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  return h;
}

// One streamed request on a (keep-alive) client. `since` gives seconds from the level's start.
template <class Since>
RequestRecord one_request(httplib::Client& cli, const Endpoint& ep, const std::string& body,
                          const LevelOptions& o, const Since& since, Progress& progress) {
  StreamReader rd(since());
  bool cut = false;
  int64_t counted = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = ep.chat_path;
  req.headers = auth_headers(o.api_key);
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  req.headers.emplace("Accept-Encoding", "identity");  // bytes as the server sends them, for the timings
  req.body = body;
  req.response_handler = [&](const httplib::Response& r) {
    rd.on_status(r.status);
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    double now = since();
    rd.on_bytes(std::string_view(data, n), now);
    progress.tokens += rd.chunk_tokens() - counted;
    counted = rd.chunk_tokens();
    if (o.time_limit_s > 0 && now >= o.time_limit_s) {
      cut = true;
      return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool answered = cli.send(req, res, err);
  if (res.status > 0) rd.on_status(res.status);
  double end = since();
  // A read the watchdog interrupted at the time limit (stop()) is a cut too, not a failure.
  if (!answered && o.time_limit_s > 0 && end >= o.time_limit_s) cut = true;
  std::string transport;
  if (!answered && !cut) transport = "no complete answer: " + describe(err);
  RequestRecord r = rd.finish(end, transport, cut);
  if (r.ok) ++progress.done;
  if (!r.ok && !r.aborted) ++progress.errors;
  return r;
}

}  // namespace

LevelResult run_level(const Endpoint& ep, const std::vector<std::string>& bodies, const LevelOptions& o,
                      Progress& progress, const std::function<void(double)>& tick) {
  LevelResult res;
  res.concurrency = o.concurrency;
  res.requests = o.requests;
  res.time_limit_s = o.time_limit_s;
  res.records.resize(static_cast<size_t>(std::max<int64_t>(o.requests, 0)));
  if (bodies.empty() || o.requests <= 0) return res;
  const Clock::time_point t0 = Clock::now();
  auto since = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const int n_workers = static_cast<int>(std::min<int64_t>(o.concurrency, o.requests));
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int w = 0; w < n_workers; ++w) {
    auto cli = std::make_unique<httplib::Client>(ep.origin);
    cli->set_keep_alive(true);
    set_timeout(*cli, 10, /*read=*/false);
    set_timeout(*cli, o.request_timeout_s, /*read=*/true);
    clients.push_back(std::move(cli));
  }
  std::atomic<int64_t> next{0};
  std::atomic<int> running{n_workers};
  std::vector<std::thread> workers;
  for (int w = 0; w < n_workers; ++w) {
    workers.emplace_back([&, w] {
      for (;;) {
        if (o.time_limit_s > 0 && since() >= o.time_limit_s) break;
        int64_t i = next.fetch_add(1);
        if (i >= o.requests) break;
        ++progress.sent;
        res.records[static_cast<size_t>(i)] =
            one_request(*clients[static_cast<size_t>(w)], ep, bodies[static_cast<size_t>(i) % bodies.size()],
                        o, since, progress);
      }
      --running;
    });
  }
  // This thread reports progress and, past the time limit, interrupts reads that wait on a silent
  // server (a request queued before its first token sends nothing).
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    double now = since();
    if (tick) tick(now);
    if (o.time_limit_s > 0 && now >= o.time_limit_s)
      for (auto& c : clients) c->stop();
  }
  for (auto& t : workers) t.join();
  res.wall_s = since();
  return res;
}

Expected<std::string> probe_server(const Endpoint& ep, const std::string& api_key) {
  httplib::Client cli(ep.origin);
  set_timeout(cli, 10, /*read=*/false);
  set_timeout(cli, 60, /*read=*/true);
  auto r = cli.Get(ep.models_path, auth_headers(api_key));
  if (!r) return make_error("cannot reach " + ep.origin + ": " + describe(r.error()));
  if (r->status != 200) return std::string();
  json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"].get<std::string>();
  return std::string();
}

Status wait_healthy(const Endpoint& ep, double wait_s) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  std::string last = "no answer";
  for (;;) {
    httplib::Client cli(ep.origin);
    set_timeout(cli, 2, /*read=*/false);
    set_timeout(cli, 10, /*read=*/true);
    auto r = cli.Get("/health");
    if (r && (r->status == 200 || r->status == 404)) return {};
    last = r ? "GET /health answers " + std::to_string(r->status) : describe(r.error());
    if (Clock::now() >= deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", wait_s);
      return make_error(ep.origin + " not ready after " + secs + " s (" + last + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

}  // namespace tf::cli::bench
