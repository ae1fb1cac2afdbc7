// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tf {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;      // empty: null
  std::string code;       // empty: null
  std::string type;       // empty: derived from status (invalid_request_error, authentication_error, ...)
  int retry_after_s = 0;  // > 0: sent as a Retry-After header
};

// A client-supplied string as it may appear inside an error message: control characters escaped
// (\n, \t, \u0001, ...) so the message stays one line, cut after max_bytes (at a UTF-8 boundary)
// with "..." so a megabyte model name does not come back in the error.
std::string user_text(std::string_view s, size_t max_bytes = 80);

// Messages are one line: any control character that reached `message` is escaped as in user_text.
ApiError bad_request(std::string message, std::string param = "", std::string code = "");

nlohmann::ordered_json error_json(const ApiError& e);

// JSON text that never throws: invalid UTF-8 (a token that ends mid-character) becomes U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace tf
