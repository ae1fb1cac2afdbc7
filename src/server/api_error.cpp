#include "server/api_error.h"

#include <algorithm>

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

std::string user_text(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t end = s.size();
  bool cut = false;
  if (end > max_bytes) {
    end = max_bytes;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;  // UTF-8 continuation
    cut = true;
  }
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < end; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut) out += "...";
  return out;
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  const bool has_control = std::any_of(message.begin(), message.end(), [](char ch) {
    const unsigned char c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  });
  if (has_control) message = user_text(message, message.size());
  return ApiError{400, std::move(message), std::move(param), std::move(code), ""};
}

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
