// The OpenAI-compatible HTTP server. It talks to the engine only through EngineApi; the engine may
// arrive after the server started listening (GET /health answers 503 until it is ready).
#pragma once
#include <memory>

#include "base/status.h"
#include "runtime/engine_api.h"
#include "server/http_metrics.h"
#include "server/serve_options.h"

namespace tf {

struct ServerState;

class HttpServer {
 public:
  explicit HttpServer(ServeOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Thread-safe; until it is called, generation routes answer 503.
  void set_engine(std::shared_ptr<EngineApi> engine);
  // Binds --host/--port (port 0: a free one) and returns the bound port.
  Expected<int> bind();
  // Serves until stop(); returns after in-flight requests have been answered.
  void run();
  // Stops accepting; requests in flight are cancelled and answered with 503 / a stream error.
  void stop();
  const HttpMetrics& metrics() const;

 private:
  std::unique_ptr<ServerState> state_;
};

}  // namespace tf
