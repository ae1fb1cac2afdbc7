// rope_f32 (apply_rotary_pos_emb_vision): f32 tables, f32 arithmetic, one rounding. out may alias x.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/vec8.cuh"

namespace tf::cuda {

void launch_rope_f32(cudaStream_t s, const Tensor& x, const Tensor& cos, const Tensor& sin,
                     const Tensor& out) {
  TF_CHECK(x.rank() == 3 && out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  const int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), h2 = d / 2;
  TF_CHECK(d % 2 == 0 && cos.rank() == 2 && cos.dim(0) == n && cos.dim(1) == d && sin.shape == cos.shape);
  TF_CHECK(cos.dtype == DType::F32 && sin.dtype == DType::F32);
  TF_DISPATCH_ACT(x.dtype, T, {
    const T* in = ptr<const T>(x);
    const float* c = ptr<const float>(cos);
    const float* sn = ptr<const float>(sin);
    T* o = ptr<T>(out);
    if (h2 % 8 == 0 && aligned16(in) && aligned16(o) && aligned16(c) && aligned16(sn)) {
      // Eight pairs (j .. j + 7 with their partners j + h2 ..) per thread, 16-byte accesses; the same
      // statements per pair (a vision call [12,544, 12, 64] took 42 us a pair per thread, BENCHMARKS.md).
      const int64_t g8 = h2 / 8;
      launch_elementwise(s, n * heads * g8, [=] __device__(int64_t e) {
        const int64_t row = e / (heads * g8), rem = e % (heads * g8);
        const int64_t h = rem / g8, j = (rem % g8) * 8;
        const int64_t off = (row * heads + h) * d;
        float lo[8], hi[8], c0[8], s0[8], c1[8], s1[8], a[8], b[8];
        load8(in + off + j, lo);
        load8(in + off + j + h2, hi);
        load8(c + row * d + j, c0);
        load8(sn + row * d + j, s0);
        load8(c + row * d + j + h2, c1);
        load8(sn + row * d + j + h2, s1);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const float a0 = lo[k] * c0[k], b0 = -hi[k] * s0[k];
          const float a1 = hi[k] * c1[k], b1 = lo[k] * s1[k];
          a[k] = a0 + b0;
          b[k] = a1 + b1;
        }
        store8(o + off + j, a);
        store8(o + off + j + h2, b);
      });
      return;
    }
    launch_elementwise(s, n * heads * h2, [=] __device__(int64_t e) {
      const int64_t row = e / (heads * h2), rem = e % (heads * h2);
      const int64_t h = rem / h2, j = rem % h2;
      const int64_t off = (row * heads + h) * d;
      const float lo = to_f(in[off + j]), hi = to_f(in[off + j + h2]);
      const float* cr = c + row * d;
      const float* sr = sn + row * d;
      const float a0 = lo * cr[j], b0 = -hi * sr[j];
      const float a1 = hi * cr[j + h2], b1 = lo * sr[j + h2];
      o[off + j] = from_f<T>(a0 + b0);
      o[off + j + h2] = from_f<T>(a1 + b1);
    });
  });
}

}  // namespace tf::cuda
