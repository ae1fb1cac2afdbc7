// copy: byte-exact device-to-device copy (on the CPU backend, host memory).
#include <cstring>

#include "backend/cpu/kernels.h"

namespace tf::cpu {

void copy(const Tensor& src, const Tensor& dst) {
  TF_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel());
  const size_t n = src.nbytes();
  if (n == 0) return;
  const char *s = static_cast<const char*>(src.data), *d = static_cast<const char*>(dst.data);
  TF_CHECK(s + n <= d || d + n <= s);  // overlapping ranges are a caller bug
  std::memcpy(dst.data, src.data, n);
}

}  // namespace tf::cpu
