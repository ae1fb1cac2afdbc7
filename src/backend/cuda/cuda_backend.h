// The CUDA backend: the op contract of backend/ops.h on one NVIDIA GPU, one stream, stream-ordered
// allocations. Model code never includes this header (it gets a Backend& from create_backend).
#pragma once
#include <memory>

#include "backend/ops.h"

namespace tf {
// Error (not an abort) when no CUDA device is usable: the message says why (driver, no device).
Expected<std::unique_ptr<Backend>> make_cuda_backend();
}  // namespace tf
