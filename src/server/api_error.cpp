#include "server/api_error.h"

namespace tf {

namespace {
const char* default_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "invalid_request_error";
    case 503:
      return "service_unavailable";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}
}  // namespace

nlohmann::ordered_json error_json(const ApiError& e) {
  nlohmann::ordered_json err = nlohmann::ordered_json::object();
  err["message"] = e.message;
  err["type"] = e.type.empty() ? default_type(e.status) : e.type;
  err["param"] = e.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param);
  err["code"] = e.code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["error"] = std::move(err);
  return j;
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tf
