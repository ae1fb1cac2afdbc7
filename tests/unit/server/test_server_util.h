// An HttpServer on a free loopback port with the fake engine, plus small raw-socket helpers for
// the tests that need to drop a connection mid-request.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_engine.h"
#include "server/http_server.h"

namespace tf::testing {

inline ServeOptions vision_options() {
  ServeOptions o;
  o.vision = true;
  return o;
}

struct TestServer {
  explicit TestServer(ServeOptions o = vision_options(), bool with_engine = true) {
    if (o.checkpoint.empty()) o.checkpoint = "/ckpt/tiny";
    o.host = "127.0.0.1";
    o.port = 0;
    engine = std::make_shared<FakeEngine>();
    server = std::make_unique<HttpServer>(o);
    auto p = server->bind();
    EXPECT_TRUE(p.ok());
    port = p.ok() ? *p : 0;
    if (with_engine) server->set_engine(engine);
    thread = std::thread([this] { server->run(); });
    for (int i = 0; i < 200; ++i) {  // wait until it accepts
      httplib::Client c("127.0.0.1", port);
      if (c.Get("/health")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~TestServer() {
    server->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(20, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body, httplib::Headers h = {}) const {
    return client().Post(path.c_str(), h, body, "application/json");
  }
  std::shared_ptr<FakeEngine> engine;
  std::unique_ptr<HttpServer> server;
  std::thread thread;
  int port = 0;
};

inline int raw_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::string raw_post(const std::string& path, const std::string& body) {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads until `needle` has been seen (or the peer closed / timeout); returns what was read.
inline std::string recv_until(int fd, const std::string& needle, int timeout_ms = 5000) {
  std::string got;
  timeval tv{0, 100'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (got.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

inline bool wait_for(const std::function<bool()>& cond, int timeout_ms = 5000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// The "data: " payloads of an SSE body, checking the framing of every event.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated SSE event at " << pos;
    if (end == std::string::npos) break;
    std::string ev = body.substr(pos, end - pos);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    EXPECT_EQ(ev.find('\n'), std::string::npos) << "multi-line event: " << ev;
    out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

}  // namespace tf::testing
