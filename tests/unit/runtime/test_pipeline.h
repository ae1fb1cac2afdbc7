// PipelineOptions for the runtime tests: the backend named by TF_TEST_BACKEND (default cpu).
#pragma once
#include "../test_backend.h"
#include "runtime/pipeline.h"

namespace tf {
inline PipelineOptions test_pipeline_options() {
  PipelineOptions o;
  o.backend = test_backend_name();
  return o;
}
}  // namespace tf
