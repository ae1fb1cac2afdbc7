// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tf {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // empty: null
  std::string code;   // empty: null
  std::string type;   // empty: derived from status (invalid_request_error, authentication_error, ...)
};

inline ApiError bad_request(std::string message, std::string param = "", std::string code = "") {
  return ApiError{400, std::move(message), std::move(param), std::move(code), ""};
}

nlohmann::ordered_json error_json(const ApiError& e);

// JSON text that never throws: invalid UTF-8 (a token that ends mid-character) becomes U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace tf
