// unfold_2x2: F.unfold(kernel 2, stride 2) on a [c, gh, gw] grid, transposed (channel-major).
#include <cstring>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) {
  TF_CHECK(x.rank() == 2 && x.dim(0) == gh * gw && out.dtype == x.dtype);
  const int64_t c = x.dim(1), oh = gh / 2, ow = gw / 2;
  TF_CHECK(out.rank() == 2 && out.dim(0) == oh * ow && out.dim(1) == 4 * c);
  const size_t es = dtype_size(x.dtype);
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(out.data);
  for (int64_t bi = 0; bi < oh; ++bi)
    for (int64_t bj = 0; bj < ow; ++bj) {
      const int64_t t = bi * ow + bj;
      for (int64_t ki = 0; ki < 2; ++ki)
        for (int64_t kj = 0; kj < 2; ++kj) {
          const int64_t srow = (2 * bi + ki) * gw + 2 * bj + kj;
          for (int64_t ch = 0; ch < c; ++ch)
            std::memcpy(dst + (t * 4 * c + ch * 4 + ki * 2 + kj) * es, src + (srow * c + ch) * es, es);
        }
    }
}

}  // namespace tf::cpu
