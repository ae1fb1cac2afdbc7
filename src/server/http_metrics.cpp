#include "server/http_metrics.h"

#include <sstream>

namespace tf {

void HttpMetrics::count_response(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{route, status}];
}

void HttpMetrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finishes_[reason];
}

int64_t HttpMetrics::responses(const std::string& route, int status) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = responses_.find({route, status});
  return it == responses_.end() ? 0 : it->second;
}

int64_t HttpMetrics::finishes(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = finishes_.find(reason);
  return it == finishes_.end() ? 0 : it->second;
}

std::string HttpMetrics::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << "# HELP tensorfold_http_requests_total HTTP responses by route and status code.\n"
     << "# TYPE tensorfold_http_requests_total counter\n";
  for (const auto& [key, n] : responses_)
    os << "tensorfold_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} "
       << n << "\n";
  os << "# HELP tensorfold_http_finished_total Generation requests by how their HTTP exchange ended.\n"
     << "# TYPE tensorfold_http_finished_total counter\n";
  for (const char* reason : {"stop", "length", "client-left", "error"}) {
    auto it = finishes_.find(reason);
    os << "tensorfold_http_finished_total{reason=\"" << reason << "\"} "
       << (it == finishes_.end() ? 0 : it->second) << "\n";
  }
  return os.str();
}

}  // namespace tf
