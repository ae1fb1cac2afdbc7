// Small helpers shared by model code: int32 uploads, scratch buffers and the capture hook.
#pragma once
#include <string>
#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace tf {

inline DeviceBuffer upload_i32(Backend& b, const std::vector<int32_t>& v) {
  DeviceBuffer d = b.alloc(DType::I32, {static_cast<int64_t>(v.size())});
  if (!v.empty()) b.upload(d.tensor(), v.data());
  return d;
}

// Calls fn(name, host copy of dev) when capturing is on.
inline void capture(const CaptureFn& fn, Backend& b, const std::string& name, const Tensor& dev) {
  if (!fn) return;
  Buffer h = download_new(b, dev);
  fn(name, h.view());
}

}  // namespace tf
