// rope_cos_sin: the f32 cos/sin table cast to act; rope: q*cos + rotate_half(q)*sin with the three
// act roundings of HF's bf16 arithmetic (partial rotary: dims >= r pass through).
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"

namespace tf::cuda {

void launch_rope_cos_sin(cudaStream_t s, const Tensor& angles, const Tensor& cos, const Tensor& sin) {
  TF_CHECK(angles.rank() == 2 && angles.dtype == DType::F32);
  const int64_t n = angles.dim(0), half = angles.dim(1);
  TF_CHECK(cos.numel() == n * 2 * half && sin.numel() == n * 2 * half && cos.dtype == sin.dtype);
  TF_DISPATCH_ACT(cos.dtype, T, {
    const float* a = ptr<const float>(angles);
    T* c = ptr<T>(cos);
    T* sn = ptr<T>(sin);
    // element e of the [n, 2*half] table: row e / (2 half), column j, angle index j % half.
    launch_elementwise(s, n * 2 * half, [=] __device__(int64_t e) {
      const int64_t i = e / (2 * half), j = e % (2 * half) % half;
      const float v = a[i * half + j];
      c[e] = from_f<T>(cos_f(v));
      sn[e] = from_f<T>(sin_f(v));
    });
  });
}

void launch_rope(cudaStream_t s, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  const opcheck::RopeDims a = opcheck::rope(x, cos, sin, out);
  const int64_t n = a.n, heads = a.heads, d = a.d, r = a.r, h2 = r / 2;
  // out may alias x: one thread per (row, head) pair of dims (j, j + h2) reads both before writing.
  TF_DISPATCH_ACT(x.dtype, T, {
    const T* in = ptr<const T>(x);
    const T* c = ptr<const T>(cos);
    const T* sn = ptr<const T>(sin);
    T* o = ptr<T>(out);
    const int64_t per_head = h2 + (d - r);  // rotated pairs, then pass-through dims
    launch_elementwise(s, n * heads * per_head, [=] __device__(int64_t e) {
      const int64_t row = e / (heads * per_head), rem = e % (heads * per_head);
      const int64_t h = rem / per_head, j = rem % per_head;
      const int64_t off = (row * heads + h) * d;
      if (j >= h2) {
        const int64_t jj = r + (j - h2);
        o[off + jj] = in[off + jj];
        return;
      }
      const float lo = to_f(in[off + j]), hi = to_f(in[off + j + h2]);
      const float c0 = to_f(c[row * r + j]), s0 = to_f(sn[row * r + j]);
      const float c1 = to_f(c[row * r + j + h2]), s1 = to_f(sn[row * r + j + h2]);
      o[off + j] = from_f<T>(rnd<T>(lo * c0) + rnd<T>(-hi * s0));
      o[off + j + h2] = from_f<T>(rnd<T>(hi * c1) + rnd<T>(lo * s1));
    });
  });
}

}  // namespace tf::cuda
