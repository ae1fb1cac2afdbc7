// patchify: Conv2d(k = s = p) input as GEMM rows, with the f32 -> act cast HF does before the conv.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_patchify(cudaStream_t s, const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw,
                     const Tensor& out) {
  TF_CHECK(pixels.rank() == 3 && pixels.dtype == DType::F32 && is_float_act(out.dtype));
  const int64_t C = pixels.dim(0), H = pixels.dim(1), W = pixels.dim(2), p = patch;
  TF_CHECK(p > 0 && gh * p <= H && gw * p <= W);
  const int64_t cols = C * p * p;
  TF_CHECK(out.rank() == 2 && out.dim(0) == gh * gw && out.dim(1) == cols);
  const float* px = ptr<const float>(pixels);
  TF_DISPATCH_ACT(out.dtype, T, {
    T* o = ptr<T>(out);
    // out[(i*gw + j)][(c*p + ky)*p + kx] = pixels[c][i*p + ky][j*p + kx]
    launch_elementwise(s, gh * gw * cols, [=] __device__(int64_t e) {
      const int64_t row = e / cols, col = e % cols;
      const int64_t i = row / gw, j = row % gw;
      const int64_t c = col / (p * p), ky = col / p % p, kx = col % p;
      o[e] = from_f<T>(px[(c * H + i * p + ky) * W + j * p + kx]);
    });
  });
}

}  // namespace tf::cuda
