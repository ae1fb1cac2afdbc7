#include "server/serve_run.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <ctime>
#include <thread>

#include "base/log.h"
#include "server/http_server.h"

namespace tf {

int run_server(const ServeOptions& options, const EngineFactory& factory) {
  // Block the stop signals in every thread (threads inherit the mask) and take them on one thread
  // with sigtimedwait, so no work happens inside a signal handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);

  HttpServer server(options);
  auto port = server.bind();
  if (!port.ok()) {
    log_error(port.error().message);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return 1;
  }
  log_info("listening on http://" + options.host + ":" + std::to_string(*port) + " as '" +
           options.served_name() + "' (loading " + options.checkpoint + ")");

  std::atomic<bool> exiting{false}, load_failed{false};
  std::shared_ptr<EngineApi> engine;
  std::thread loader([&] {
    auto made = factory(options);
    if (!made.ok()) {
      log_error("cannot load " + options.checkpoint + ": " + made.error().message);
      load_failed = true;
      server.stop();
      return;
    }
    engine = std::shared_ptr<EngineApi>(std::move(made).value());
    server.set_engine(engine);
    log_info("engine created for '" + options.served_name() + "'");
  });
  std::thread signals([&] {
    timespec tick{0, 200'000'000};
    while (!exiting) {
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        log_info(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                 ": no new connections; cancelling requests in flight");
        server.stop();
        return;
      }
    }
  });

  server.run();  // returns once stopped and every connection's handler has returned
  exiting = true;
  signals.join();
  loader.join();
  server.set_engine(nullptr);
  engine.reset();  // the engine thread ends here, after no handler can reach it
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  log_info("server stopped");
  return load_failed ? 1 : 0;
}

}  // namespace tf
