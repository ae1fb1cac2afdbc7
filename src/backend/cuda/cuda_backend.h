// The CUDA backend: the op contract of backend/ops.h on one NVIDIA GPU, one stream, stream-ordered
// allocations. Model code never includes this header (it gets a Backend& from create_backend).
#pragma once
#include <memory>
#include <string>

#include "backend/ops.h"

namespace tf {
// Error (not an abort) when no CUDA device is usable: the message says why (driver, no device,
// a device that cannot be initialised). On success *device (when given) describes the GPU chosen.
// GPU `index` (CUDA's numbering, as nvidia-smi lists them unless CUDA_VISIBLE_DEVICES says otherwise).
Expected<std::unique_ptr<Backend>> make_cuda_backend(std::string* device = nullptr, int index = 0);

class DeviceFailure;
// The failure state of a CUDA backend (null for another backend): test_hooks::fail_backend_op.
DeviceFailure* cuda_device_failure(Backend& b);
}  // namespace tf
