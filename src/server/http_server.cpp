#include "server/http_server.h"

#include <algorithm>
#include <thread>

#include "base/log.h"
#include "base/sha256.h"
#include "server/client_conn.h"
#include "server/server_state.h"

namespace tf {
namespace {

using json = ordered_json;

const char* kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/tokenize", "/v1/detokenize",
                         "/v1/models",           "/health",         "/metrics"};

// Metric label for a path; unknown paths share one label so scans cannot grow the series.
std::string route_label(const std::string& path) {
  for (const char* r : kRoutes)
    if (path == r) return r;
  return "other";
}

bool authorized(const ServerState& st, const httplib::Request& req) {
  if (st.options.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + st.options.api_key;
}

void handle_tokenize(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  auto engine = st.ready_engine(res);
  if (!engine) return;
  ParsedRequest pr;
  if (auto err = parse_generation_request(req.body, Endpoint::Tokenize, st.parse_context(engine.get()), &pr))
    return send_error(res, *err);
  auto ids = engine->tokenize(pr.gen);
  if (!ids.ok()) return send_error(res, bad_request(ids.error().message));
  json j = json::object();
  j["tokens"] = *ids;
  j["count"] = ids->size();
  j["max_model_len"] = engine->info().context_length;
  j["token_sha256"] = token_sha256(*ids);
  send_json(res, 200, j);
}

void handle_detokenize(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  auto engine = st.ready_engine(res);
  if (!engine) return;
  std::vector<int32_t> ids;
  if (auto err = parse_detokenize_request(req.body, st.parse_context(engine.get()), &ids))
    return send_error(res, *err);
  auto text = engine->detokenize(ids);
  if (!text.ok()) return send_error(res, bad_request(text.error().message, "tokens"));
  send_json(res, 200, json{{"prompt", *text}});
}

void handle_models(ServerState& st, httplib::Response& res) {
  auto engine = st.engine();
  json m = json::object();
  m["id"] = st.options.served_name();
  m["object"] = "model";
  m["created"] = engine ? engine->info().created_unix : 0;
  m["owned_by"] = "tensorfold";
  if (engine && engine->ready()) m["max_model_len"] = engine->info().context_length;
  send_json(res, 200, json{{"object", "list"}, {"data", json::array({m})}});
}

void install_routes(ServerState& st) {
  httplib::Server& http = st.http;
  http.Post("/v1/chat/completions",
            [&st](const httplib::Request& q, httplib::Response& r) { handle_generation(st, q, r, true); });
  http.Post("/v1/completions",
            [&st](const httplib::Request& q, httplib::Response& r) { handle_generation(st, q, r, false); });
  http.Post("/v1/tokenize",
            [&st](const httplib::Request& q, httplib::Response& r) { handle_tokenize(st, q, r); });
  http.Post("/v1/detokenize",
            [&st](const httplib::Request& q, httplib::Response& r) { handle_detokenize(st, q, r); });
  http.Get("/v1/models", [&st](const httplib::Request&, httplib::Response& r) { handle_models(st, r); });
  // 200 while some engine serves ("ok", or "degraded" when others failed: the survivors keep serving and
  // tensorfold_engine_failed says which is out); 503 while loading, stopping, or once every engine failed
  // ("failed": a liveness probe then restarts the server, which gets fresh devices). Each engine's state
  // is listed under "engines".
  http.Get("/health", [&st](const httplib::Request&, httplib::Response& r) {
    auto engine = st.engine();
    bool ok = engine && engine->ready() && !st.stopping;
    json body = json::object();
    std::string status = st.stopping ? "stopping" : "loading";
    if (engine) {
      json engines = json::array();
      size_t n_failed = 0;
      for (const EngineHealth& h : engine->health()) {
        json e{{"engine", engines.size()}, {"status", h.status}};
        if (!h.error.empty()) e["error"] = h.error;
        engines.push_back(std::move(e));
        n_failed += h.status == "failed";
      }
      if (!st.stopping)
        status = ok ? (n_failed > 0 ? "degraded" : "ok") : (n_failed > 0 ? "failed" : "loading");
      body["status"] = status;
      body["engines"] = std::move(engines);
    } else {
      body["status"] = status;
    }
    send_json(r, ok ? 200 : 503, body);
  });
  http.Get("/metrics", [&st](const httplib::Request&, httplib::Response& r) {
    auto engine = st.engine();
    std::string text = engine ? engine->metrics_text() : std::string();
    if (!text.empty() && text.back() != '\n') text += '\n';
    r.set_content(text + st.metrics.text(), "text/plain; version=0.0.4");
  });

  http.set_pre_routing_handler([&st](const httplib::Request& q, httplib::Response& r) {
    if (q.path.rfind("/v1/", 0) == 0 && !authorized(st, q)) {
      send_error(r, ApiError{401, "missing or wrong API key; send 'Authorization: Bearer KEY'", "",
                             "invalid_api_key", ""});
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib's own refusals (404, 405, 413 over --max-body-mb, ...) come with an empty body.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([&st](const httplib::Request& q, httplib::Response& r) {
        if (!r.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e{r.status, "", "", "", ""};
        if (r.status == 404)
          e.message = "no route for " + q.method + " " + q.path;
        else if (r.status == 413)
          e.message = "request body is larger than the server's limit of " +
                      std::to_string(st.options.max_body_mb) + " MiB (--max-body-mb)";
        else
          e.message = "HTTP " + std::to_string(r.status);
        if (r.status == 413) e.code = "request_too_large";
        r.set_content(dump_json(error_json(e)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = std::string("internal error: ") + ex.what();
    } catch (...) {
    }
    log_error(what);
    send_error(r, ApiError{500, what, "", "", ""});
  });
  http.set_logger([&st](const httplib::Request& q, const httplib::Response& r) {
    st.metrics.count_response(route_label(q.path), r.status);
  });
}

}  // namespace

void send_json(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  send_json(res, e.status, error_json(e));
}

std::shared_ptr<EngineApi> ServerState::ready_engine(httplib::Response& res) const {
  auto e = engine();
  if (stopping) {
    send_error(res, ApiError{503, "the server is shutting down", "", "", ""});
    return nullptr;
  }
  if (!e || !e->ready()) {
    std::string failure;
    if (e)
      for (const EngineHealth& h : e->health())
        if (h.status == "failed") failure = h.error;
    if (!failure.empty()) {
      send_error(res, ApiError{503, failure + "; no engine is serving", "", "engine_failed", "", 1});
      return nullptr;
    }
    send_error(res,
               ApiError{503, "the model is still loading; retry when GET /health answers 200", "", "", ""});
    return nullptr;
  }
  return e;
}

ParseContext ServerState::parse_context(const EngineApi* engine) const {
  ParseContext c;
  c.served_name = options.served_name();
  c.accepted_models = {c.served_name, options.checkpoint};
  EngineInfo info = engine ? engine->info() : EngineInfo{};
  if (!info.model_name.empty()) c.accepted_models.push_back(info.model_name);
  // Images need both --vision and a checkpoint with an image tower; without --vision the server is
  // text-only even on a vision checkpoint (what --help promises).
  c.vision = options.vision && (!engine || info.vision);
  c.no_thinking = options.no_thinking;
  c.no_drafts = options.no_drafts;
  c.default_temperature = options.temperature;
  c.default_max_tokens = options.max_tokens;
  c.media.allowed_dir = options.allowed_media_dir;
  c.media.max_bytes = options.max_body_mb << 20;
  return c;
}

HttpServer::HttpServer(ServeOptions options) : state_(std::make_unique<ServerState>()) {
  state_->options = std::move(options);
  ServerState& st = *state_;
  // Each waiting request holds a worker thread, so size the pool well above --parallel: queued
  // requests must still be able to notice their client leaving.
  size_t threads = std::max<size_t>(64, static_cast<size_t>(st.options.parallel) * 4);
  st.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  st.http.set_payload_max_length(static_cast<size_t>(st.options.max_body_mb) << 20);
  st.http.set_read_timeout(30, 0);
  st.http.set_write_timeout(30, 0);
  install_routes(st);
}

HttpServer::~HttpServer() = default;

void HttpServer::set_engine(std::shared_ptr<EngineApi> engine) { state_->set_engine(std::move(engine)); }

Expected<int> HttpServer::bind() {
  int port =
      state_->options.port == 0
          ? state_->http.bind_to_any_port(state_->options.host)
          : (state_->http.bind_to_port(state_->options.host, state_->options.port) ? state_->options.port
                                                                                   : -1);
  if (port <= 0)
    return make_error("cannot listen on " + state_->options.host + ":" +
                      std::to_string(state_->options.port) + " (address in use or not available)");
  if (!raise_listen_backlog(port, 1024))
    log_warn("could not raise the listen backlog; bursts of new connections may stall");
  return port;
}

void HttpServer::run() { state_->http.listen_after_bind(); }

void HttpServer::stop() {
  state_->stopping = true;
  state_->http.stop();
}

const HttpMetrics& HttpServer::metrics() const { return state_->metrics; }

}  // namespace tf
