// patchify: Conv2d(k = s = p) input as GEMM rows, with the f32 -> act cast HF does before the conv.
#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"

namespace tf::cpu {

void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) {
  TF_CHECK(pixels.rank() == 3 && pixels.dtype == DType::F32 && is_float_act(out.dtype));
  const int64_t C = pixels.dim(0), H = pixels.dim(1), W = pixels.dim(2), p = patch;
  TF_CHECK(p > 0 && gh * p <= H && gw * p <= W);
  const int64_t cols = C * p * p;
  TF_CHECK(out.rank() == 2 && out.dim(0) == gh * gw && out.dim(1) == cols);
  const float* px = pixels.as<const float>();
  const bool bf = out.dtype == DType::BF16;
  for (int64_t i = 0; i < gh; ++i)
    for (int64_t j = 0; j < gw; ++j) {
      const int64_t row = (i * gw + j) * cols;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ky = 0; ky < p; ++ky)
          for (int64_t kx = 0; kx < p; ++kx) {
            const float v = px[(c * H + i * p + ky) * W + j * p + kx];
            const int64_t o = row + (c * p + ky) * p + kx;
            if (bf)
              out.as<uint16_t>()[o] = f32_to_bf16(v);
            else
              out.as<float>()[o] = v;
          }
    }
}

}  // namespace tf::cpu
