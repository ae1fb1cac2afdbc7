// Small helpers shared by model code: int32 uploads, scratch buffers and the capture hook.
#pragma once
#include <initializer_list>
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

// The rows of `parts` stacked into one [Σ rows, cols] device buffer (the fused q/k/v and gate/up
// projections: each output column still reads its own weight row, so a linear over the stack gives the
// same bits as the separate linears side by side).
inline DeviceBuffer concat_rows(Backend& b, std::initializer_list<const DeviceBuffer*> parts) {
  const DeviceBuffer& first = **parts.begin();
  int64_t rows = 0;
  for (const DeviceBuffer* p : parts) rows += p->tensor().dim(0);
  const Tensor& f = first.tensor();
  Shape shape = f.shape;
  shape[0] = rows;
  DeviceBuffer out = b.alloc_uninit(f.dtype, shape);  // every row written below
  int64_t r = 0;
  for (const DeviceBuffer* p : parts) {
    const int64_t n = p->tensor().dim(0);
    b.copy(p->tensor(), out.tensor().slice_rows(r, r + n));
    r += n;
  }
  return out;
}

// Calls fn(name, host copy of dev) when capturing is on.
inline void capture(const CaptureFn& fn, Backend& b, const std::string& name, const Tensor& dev) {
  if (!fn) return;
  Buffer h = download_new(b, dev);
  fn(name, h.view());
}

}  // namespace tf
