// rope_cos_sin and rope: HF's f32 cos/sin table cast to act, then q*cos + rotate_half(q)*sin in act.
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {

void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) {
  TF_CHECK(angles.rank() == 2 && angles.dtype == DType::F32);
  const int64_t n = angles.dim(0), half = angles.dim(1);
  TF_CHECK(cos.numel() == n * 2 * half && sin.numel() == n * 2 * half && cos.dtype == sin.dtype);
  std::vector<float> c(static_cast<size_t>(2 * half)), s(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < n; ++i) {
    const float* a = angles.as<const float>() + i * half;
    for (int64_t j = 0; j < half; ++j) {
      c[j] = c[j + half] = fm::cos(a[j]);
      s[j] = s[j + half] = fm::sin(a[j]);
    }
    store_f32_row(cos, i * 2 * half, 2 * half, c.data());
    store_f32_row(sin, i * 2 * half, 2 * half, s.data());
  }
}

void rope(ThreadPool& pool, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  const opcheck::RopeDims a = opcheck::rope(x, cos, sin, out);
  const int64_t n = a.n, heads = a.heads, d = a.d, r = a.r, h2 = r / 2;
  const DType act = x.dtype;
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    std::vector<float> c(static_cast<size_t>(r)), s(static_cast<size_t>(r)), in(static_cast<size_t>(d)),
        o(static_cast<size_t>(d));
    for (int64_t i = i0; i < i1; ++i) {
      load_f32_row(cos, i * r, r, c.data());
      load_f32_row(sin, i * r, r, s.data());
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = (i * heads + h) * d;
        load_f32_row(x, off, d, in.data());
        for (int64_t j = 0; j < r; ++j) {
          const float rot = j < h2 ? -in[j + h2] : in[j - h2];
          o[j] = rnd(rnd(in[j] * c[j], act) + rnd(rot * s[j], act), act);
        }
        for (int64_t j = r; j < d; ++j) o[j] = in[j];
        store_f32_row(out, off, d, o.data());
      }
    }
  });
}

}  // namespace tf::cpu
