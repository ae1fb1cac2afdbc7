// cast: F32 <-> BF16 elementwise (RNE), or a copy when the dtypes match.
#include <cstring>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void cast(const Tensor& x, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && is_float_act(x.dtype) && is_float_act(out.dtype));
  if (x.dtype == out.dtype) {
    if (x.data != out.data) std::memmove(out.data, x.data, x.nbytes());
    return;
  }
  constexpr int64_t kChunk = 4096;
  std::vector<float> buf(kChunk);
  for (int64_t off = 0; off < x.numel(); off += kChunk) {
    const int64_t len = std::min(kChunk, x.numel() - off);
    load_f32_row(x, off, len, buf.data());
    store_f32_row(out, off, len, buf.data());
  }
}

}  // namespace tf::cpu
