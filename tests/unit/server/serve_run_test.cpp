// run_server, the real serve loop, in a child process with the real engine on a tiny checkpoint:
// GET /health answers 503 while the engine loads (the factory waits on a pipe the test controls),
// then 200; SIGTERM ends the process with exit code 0. A child process, because run_server owns the
// process's SIGINT/SIGTERM handling.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/serve_run.h"
#include "test_server_util.h"

namespace tf::testing {
namespace {

using json = nlohmann::json;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

[[noreturn]] void child(int port, int gate_fd) {
  ServeOptions o;
  o.checkpoint = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/lighton_ocr-tiny-bf16";
  o.host = "127.0.0.1";
  o.port = port;
  o.name = "tiny";
  EngineFactory factory = [gate_fd](const ServeOptions& so) -> Expected<std::unique_ptr<EngineApi>> {
    char c = 0;
    if (::read(gate_fd, &c, 1) != 1) return make_error("the test closed the gate");
    EngineOptions e;
    e.checkpoint = so.checkpoint;
    e.name = so.served_name();
    TF_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(e));
    return std::unique_ptr<EngineApi>(std::move(engine));
  };
  ::_exit(run_server(o, factory));
}

TEST(ServeRun, HealthIs503WhileLoadingThenRealEngineThenSigtermExits0) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(gate[1]);
    child(port, gate[0]);
  }
  ::close(gate[0]);
  // A failed assertion below returns early: never leave the child behind.
  struct Reaper {
    pid_t pid;
    bool reaped = false;
    ~Reaper() {
      if (reaped) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  ASSERT_TRUE(wait_for([&] { return static_cast<bool>(c.Get("/health")); }, 20000)) << "never listened";
  // The factory is blocked on the gate: the engine is loading, for as long as the test wants.
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body)["status"], "loading");
  auto early = c.Post("/v1/chat/completions",
                      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4})", "application/json");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_EQ(json::parse(early->body)["error"]["message"],
            "the model is still loading; retry when GET /health answers 200");
  h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);

  ASSERT_EQ(::write(gate[1], "x", 1), 1);
  EXPECT_TRUE(wait_for(
      [&] {
        auto r = c.Get("/health");
        return r && r->status == 200;
      },
      60000));
  auto ok = c.Post("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"ignore_eos":true})",
                   "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["usage"]["completion_tokens"], 4);

  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  reaper.reaped = true;
  ::close(gate[1]);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace tf::testing
