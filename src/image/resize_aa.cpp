#include "image/resize_aa.h"

#include <algorithm>
#include <cmath>

#include "base/status.h"
#include "base/thread_pool.h"

namespace tf {
namespace {

// PyTorch's cubic_convolution1/2 with A = -0.5 (antialias=True, Pillow's coefficient). PyTorch's
// AVX2/AVX512 kernel builds compile with -mfma and GCC's default contraction, so the polynomials run
// as fused multiply-adds; the float32 path proves it (resize_aa_f32 matches torch only with FMA), and
// this file is the same translation unit there. Spelled out with std::fma because this project
// builds with -ffp-contract=off.
double cubic_aa(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return std::fma(std::fma(a + 2, x, -(a + 3)) * x, x, 1.0);
  if (x < 2.0) return std::fma(std::fma(std::fma(a, x, -5 * a), x, 8 * a), x, -4 * a);
  return 0.0;
}

double triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

}  // namespace

AxisResample plan_axis_resample(int in_size, int out_size, ResizeFilter filter) {
  TF_CHECK(in_size > 0 && out_size > 0);
  const int interp_size = filter == ResizeFilter::bicubic ? 4 : 2;
  double (*fn)(double) = filter == ResizeFilter::bicubic ? cubic_aa : triangle;
  const double scale = static_cast<double>(in_size) / out_size;
  const double support = scale >= 1.0 ? (interp_size * 0.5) * scale : interp_size * 0.5;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;

  AxisResample p;
  p.in_size = in_size;
  p.out_size = out_size;
  p.ksize = ksize;
  p.xmin.resize(out_size);
  p.xsize.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size) * ksize, 0.0);  // [out_size, ksize]
  double wt_max = 0.0;
  for (int i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), int64_t{in_size}) - xmin;
    xsize = std::clamp(xsize, int64_t{0}, int64_t{ksize});
    double* wi = &w[static_cast<size_t>(i) * ksize];
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      const double v = fn((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      wi[j] = v;
      total += v;
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        wt_max = std::max(wt_max, wi[j]);
      }
    }
    p.xmin[i] = static_cast<int>(xmin);
    p.xsize[i] = static_cast<int>(xsize);
  }
  unsigned precision = 0;
  for (precision = 0; precision < 22; ++precision) {
    const int next = static_cast<int>(0.5 + wt_max * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  p.precision = static_cast<int>(precision);
  p.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << precision);
    p.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return p;
}

namespace {

inline uint8_t finish(int32_t acc, int precision) {
  const int32_t v = acc >> precision;  // arithmetic shift, as _mm256_srai_epi32
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// [rows, in_w] -> [rows, out_w] for `rows` rows.
void horizontal(const uint8_t* src, uint8_t* dst, int64_t rows, const AxisResample& p) {
  const int in_w = p.in_size, out_w = p.out_size;
  global_pool().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* in = src + r * in_w;
      uint8_t* out = dst + r * out_w;
      for (int x = 0; x < out_w; ++x) {
        const int16_t* k = &p.weights[static_cast<size_t>(x) * p.ksize];
        const uint8_t* s = in + p.xmin[x];
        int32_t acc = 1 << (p.precision - 1);
        for (int j = 0; j < p.xsize[x]; ++j) acc += s[j] * k[j];
        out[x] = finish(acc, p.precision);
      }
    }
  });
}

// [planes, in_h, w] -> [planes, out_h, w].
void vertical(const uint8_t* src, uint8_t* dst, int planes, int w, const AxisResample& p) {
  const int in_h = p.in_size, out_h = p.out_size;
  global_pool().parallel_for(static_cast<int64_t>(planes) * out_h, [&](int64_t i0, int64_t i1) {
    std::vector<int32_t> acc(w);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t c = i / out_h;
      const int y = static_cast<int>(i % out_h);
      const int16_t* k = &p.weights[static_cast<size_t>(y) * p.ksize];
      const uint8_t* plane = src + c * in_h * static_cast<int64_t>(w);
      std::fill(acc.begin(), acc.end(), 1 << (p.precision - 1));
      for (int j = 0; j < p.xsize[y]; ++j) {
        const uint8_t* row = plane + static_cast<int64_t>(p.xmin[y] + j) * w;
        const int32_t kj = k[j];
        for (int x = 0; x < w; ++x) acc[x] += row[x] * kj;
      }
      uint8_t* out = dst + (c * out_h + y) * static_cast<int64_t>(w);
      for (int x = 0; x < w; ++x) out[x] = finish(acc[x], p.precision);
    }
  });
}

}  // namespace

std::vector<uint8_t> resize_aa_u8(std::span<const uint8_t> planes, int channels, int height, int width,
                                  int out_h, int out_w, ResizeFilter filter) {
  TF_CHECK(channels > 0 && height > 0 && width > 0 && out_h > 0 && out_w > 0);
  TF_CHECK(planes.size() == static_cast<size_t>(channels) * height * width);
  if (out_h == height && out_w == width) return {planes.begin(), planes.end()};
  std::vector<uint8_t> cur(planes.begin(), planes.end());
  int cur_w = width;
  if (out_w != width) {
    const AxisResample p = plan_axis_resample(width, out_w, filter);
    std::vector<uint8_t> next(static_cast<size_t>(channels) * height * out_w);  // [C, H, out_w]
    horizontal(cur.data(), next.data(), static_cast<int64_t>(channels) * height, p);
    cur.swap(next);
    cur_w = out_w;
  }
  if (out_h != height) {
    const AxisResample p = plan_axis_resample(height, out_h, filter);
    std::vector<uint8_t> next(static_cast<size_t>(channels) * out_h * cur_w);  // [C, out_h, out_w]
    vertical(cur.data(), next.data(), channels, cur_w, p);
    cur.swap(next);
  }
  return cur;
}

}  // namespace tf
