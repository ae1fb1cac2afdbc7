// unfold_2x2: F.unfold(kernel 2, stride 2) on a [c, gh, gw] grid, transposed (channel-major); exact.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {
namespace {

// Elements moved as 2- or 4-byte units U.
template <class U>
void run(cudaStream_t s, const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) {
  const int64_t c = x.dim(1), oh = gh / 2, ow = gw / 2;
  const U* src = ptr<const U>(x);
  U* dst = ptr<U>(out);
  // out[t][ch*4 + ki*2 + kj] = x[(2bi+ki)*gw + 2bj+kj][ch], t = bi*ow + bj
  launch_elementwise(s, oh * ow * 4 * c, [=] __device__(int64_t e) {
    const int64_t t = e / (4 * c), col = e % (4 * c);
    const int64_t ch = col / 4, ki = col / 2 % 2, kj = col % 2;
    const int64_t bi = t / ow, bj = t % ow;
    dst[e] = src[((2 * bi + ki) * gw + 2 * bj + kj) * c + ch];
  });
}

}  // namespace

void launch_unfold_2x2(cudaStream_t s, const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) {
  TF_CHECK(x.rank() == 2 && x.dim(0) == gh * gw && out.dtype == x.dtype);
  const int64_t c = x.dim(1), oh = gh / 2, ow = gw / 2;
  TF_CHECK(out.rank() == 2 && out.dim(0) == oh * ow && out.dim(1) == 4 * c);
  TF_CHECK(dtype_size(x.dtype) == 2 || dtype_size(x.dtype) == 4);
  if (dtype_size(x.dtype) == 2)
    run<uint16_t>(s, x, gh, gw, out);
  else
    run<uint32_t>(s, x, gh, gw, out);
}

}  // namespace tf::cuda
