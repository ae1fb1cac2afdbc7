// PyTorch's float32 antialiased resample (separable_upsample_generic_Nd_kernel_impl with float
// weights): what torchvision's resize runs for a dtype without a native uint8 kernel. Transformers
// reaches it for 16-bit PNGs: uint16 -> f32 -> interpolate -> .to(uint16), no clamp, no rounding.
#include <algorithm>
#include <cmath>

#include "base/status.h"
#include "base/thread_pool.h"
#include "image/resize_aa.h"

// FMA: PyTorch's CPU kernels for AVX2/AVX512 are compiled with -mfma and GCC contracts a * b + c into
// fused multiply-adds (-ffp-contract=fast is GCC's default); both the filter polynomials and the
// accumulation `output += t * w` run fused. Checked against torch 2.11 on a 16-bit PNG golden: only
// fused in both places reproduces every value (plain arithmetic differs by 1 in ~1000 of 63504).
namespace tf {
namespace {

// HelperInterpCubic::aa_filter<float> (a = -0.5) / HelperInterpLinear::aa_filter<float>, in float.
float cubic_f32(float x) {
  constexpr float a = -0.5f;
  x = std::fabs(x);
  if (x < 1.0f) return std::fma(std::fma(a + 2, x, -(a + 3)) * x, x, 1.0f);
  if (x < 2.0f) return std::fma(std::fma(std::fma(a, x, -5 * a), x, 8 * a), x, -4 * a);
  return 0.0f;
}

float triangle_f32(float x) {
  x = std::fabs(x);
  return x < 1.0f ? 1.0f - x : 0.0f;
}

struct PlanF32 {
  int in_size = 0, out_size = 0, ksize = 0;
  std::vector<int> xmin, xsize;
  std::vector<float> weights;  // [out_size, ksize]
};

// _compute_index_ranges_weights<float> with antialias: the scale is float (in / out in float), the
// support and center are rounded to float, the filter argument is formed in double and rounded to
// float at the call, the weights are normalized in float.
PlanF32 plan_f32(int in_size, int out_size, ResizeFilter filter) {
  const int interp_size = filter == ResizeFilter::bicubic ? 4 : 2;
  float (*fn)(float) = filter == ResizeFilter::bicubic ? cubic_f32 : triangle_f32;
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const float support =
      static_cast<float>(scale >= 1.0 ? (interp_size * 0.5) * static_cast<double>(scale) : interp_size * 0.5);
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  const float invscale = scale >= 1.0 ? static_cast<float>(1.0 / static_cast<double>(scale)) : 1.0f;
  PlanF32 p;
  p.in_size = in_size;
  p.out_size = out_size;
  p.ksize = ksize;
  p.xmin.resize(out_size);
  p.xsize.resize(out_size);
  p.weights.assign(static_cast<size_t>(out_size) * ksize, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    const float center = static_cast<float>(static_cast<double>(scale) * (i + 0.5));
    const int64_t xmin =
        std::max(static_cast<int64_t>(static_cast<double>(center - support) + 0.5), int64_t{0});
    int64_t xsize =
        std::min(static_cast<int64_t>(static_cast<double>(center + support) + 0.5), int64_t{in_size}) - xmin;
    xsize = std::clamp(xsize, int64_t{0}, int64_t{ksize});
    float* w = &p.weights[static_cast<size_t>(i) * ksize];
    float total = 0.0f;
    for (int64_t j = 0; j < xsize; ++j) {
      const float d = static_cast<float>(j + xmin) - center;
      const float v = fn(static_cast<float>((static_cast<double>(d) + 0.5) * static_cast<double>(invscale)));
      w[j] = v;
      total += v;
    }
    if (total != 0.0f)
      for (int64_t j = 0; j < xsize; ++j) w[j] /= total;
    p.xmin[i] = static_cast<int>(xmin);
    p.xsize[i] = static_cast<int>(xsize);
  }
  return p;
}

// interpolate_aa_single_dim: t0 * w0, then += t_j * w_j in order (fused).
inline float dot(const float* src, int64_t stride, const float* w, int n) {
  float acc = src[0] * w[0];
  for (int j = 1; j < n; ++j) acc = std::fma(src[j * stride], w[j], acc);
  return acc;
}

}  // namespace

std::vector<float> resize_aa_f32(std::span<const float> planes, int channels, int height, int width,
                                 int out_h, int out_w, ResizeFilter filter) {
  TF_CHECK(channels > 0 && height > 0 && width > 0 && out_h > 0 && out_w > 0);
  TF_CHECK(planes.size() == static_cast<size_t>(channels) * height * width);
  std::vector<float> cur(planes.begin(), planes.end());
  if (out_h == height && out_w == width) return cur;
  int cur_w = width;
  if (out_w != width) {
    const PlanF32 p = plan_f32(width, out_w, filter);
    std::vector<float> next(static_cast<size_t>(channels) * height * out_w);  // [C, H, out_w]
    global_pool().parallel_for(static_cast<int64_t>(channels) * height, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int x = 0; x < out_w; ++x)
          next[r * out_w + x] =
              dot(&cur[r * width + p.xmin[x]], 1, &p.weights[static_cast<size_t>(x) * p.ksize], p.xsize[x]);
    });
    cur.swap(next);
    cur_w = out_w;
  }
  if (out_h != height) {
    const PlanF32 p = plan_f32(height, out_h, filter);
    std::vector<float> next(static_cast<size_t>(channels) * out_h * cur_w);  // [C, out_h, out_w]
    global_pool().parallel_for(static_cast<int64_t>(channels) * out_h, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t c = i / out_h;
        const int y = static_cast<int>(i % out_h);
        const float* plane = &cur[c * height * static_cast<int64_t>(cur_w)];
        for (int x = 0; x < cur_w; ++x)
          next[i * cur_w + x] = dot(plane + static_cast<int64_t>(p.xmin[y]) * cur_w + x, cur_w,
                                    &p.weights[static_cast<size_t>(y) * p.ksize], p.xsize[y]);
      }
    });
    cur.swap(next);
  }
  return cur;
}

std::vector<uint16_t> resize_aa_u16(std::span<const uint16_t> planes, int channels, int height, int width,
                                    int out_h, int out_w, ResizeFilter filter) {
  if (out_h == height && out_w == width) return {planes.begin(), planes.end()};
  const std::vector<float> f(planes.begin(), planes.end());
  const std::vector<float> r = resize_aa_f32(f, channels, height, width, out_h, out_w, filter);
  std::vector<uint16_t> out(r.size());
  // .to(torch.uint16) without clamp or round: truncation toward zero, then the low 16 bits (what the
  // float -> int32 -> uint16 conversion does on x86; out-of-range overshoots wrap).
  for (size_t i = 0; i < r.size(); ++i) out[i] = static_cast<uint16_t>(static_cast<int32_t>(r[i]));
  return out;
}

}  // namespace tf
