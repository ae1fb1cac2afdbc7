// The backend the model and runtime tests run on: "cpu" unless TF_TEST_BACKEND names another ("cuda"
// on a GPU machine runs the goldens, parity, prompt-cache and draft tests through the CUDA backend).
#pragma once
#include <cstdlib>
#include <string>

namespace tf {
inline std::string test_backend_name() {
  const char* v = std::getenv("TF_TEST_BACKEND");
  return v && *v ? v : "cpu";
}
}  // namespace tf
