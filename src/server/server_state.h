// Internal to server/: what the route handlers share. Includes httplib, so only server/*.cpp use it.
#pragma once
#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/engine_api.h"
#include "server/api_error.h"
#include "server/http_metrics.h"
#include "server/request_parse.h"
#include "server/serve_options.h"

namespace tf {

struct ServerState {
  ServeOptions options;
  httplib::Server http;
  HttpMetrics metrics;
  std::atomic<bool> stopping{false};

  std::shared_ptr<EngineApi> engine() const {
    std::lock_guard<std::mutex> lock(engine_mu);
    return engine_;
  }
  void set_engine(std::shared_ptr<EngineApi> e) {
    std::lock_guard<std::mutex> lock(engine_mu);
    engine_ = std::move(e);
  }
  // The engine when it is loaded and ready; otherwise writes a 503 and returns null.
  std::shared_ptr<EngineApi> ready_engine(httplib::Response& res) const;
  ParseContext parse_context(const EngineApi* engine) const;

 private:
  mutable std::mutex engine_mu;
  std::shared_ptr<EngineApi> engine_;
};

void send_json(httplib::Response& res, int status, const ordered_json& body);
void send_error(httplib::Response& res, const ApiError& e);

// POST /v1/chat/completions and /v1/completions (generation.cpp).
void handle_generation(ServerState& st, const httplib::Request& req, httplib::Response& res, bool chat);

}  // namespace tf
