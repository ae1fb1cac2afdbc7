// The backend the model tests run on: "cpu" unless TF_TEST_BACKEND names another ("cuda" on a GPU
// machine runs every golden and parity test through the CUDA backend, unchanged).
#pragma once
#include <cstdlib>
#include <string>

namespace tf {
inline std::string test_backend_name() {
  const char* v = std::getenv("TF_TEST_BACKEND");
  return v && *v ? v : "cpu";
}
}  // namespace tf
