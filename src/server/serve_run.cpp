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
  // A shell starts background jobs with SIGINT ignored, and an ignored signal is discarded even
  // while blocked; restore the default so sigtimedwait can take it (it stays blocked meanwhile).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);

  HttpServer server(options);
  auto port = server.bind();
  if (!port.ok()) {
    log_error(port.error().message);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return 1;
  }
  log_info("listening on http://" + options.host + ":" + std::to_string(*port) + " as '" +
           options.served_name() + "' (loading " + options.checkpoint + ")");

  // httplib drops a stop() that comes before its accept loop runs, so whoever wants the server
  // down sets stop_requested and the signal thread repeats stop() until run() has returned.
  std::atomic<bool> exiting{false}, load_failed{false}, stop_requested{false};
  std::shared_ptr<EngineApi> engine;
  std::thread loader([&] {
    auto made = factory(options);
    if (!made.ok()) {
      log_error("cannot load " + options.checkpoint + ": " + made.error().message);
      load_failed = true;
      stop_requested = true;
      return;
    }
    engine = std::shared_ptr<EngineApi>(std::move(made).value());
    server.set_engine(engine);
    log_info("engine created for '" + options.served_name() + "'");
  });
  std::thread signals([&] {
    timespec tick{0, 50'000'000};
    while (!exiting) {
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if ((sig == SIGINT || sig == SIGTERM) && !stop_requested) {
        log_info(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                 ": no new connections; cancelling requests in flight");
        stop_requested = true;
      }
      if (stop_requested) server.stop();
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
