// The HTTP layer's Prometheus counters: responses by route and status, finished generations by
// reason. /metrics appends them to the engine's own exposition.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace tf {

class HttpMetrics {
 public:
  void count_response(const std::string& route, int status);
  // reason: stop, length, client-left, error
  void count_finish(const std::string& reason);
  std::string text() const;
  int64_t responses(const std::string& route, int status) const;
  int64_t finishes(const std::string& reason) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> responses_;
  std::map<std::string, int64_t> finishes_;
};

}  // namespace tf
