// linear: out = x · w^T (+ bias), f32 accumulation in dot_f32's fixed order, one rounding. Where simd_on()
// (simd.h) the same dots run eight lanes at a time in tiles of 2 rows x 4 columns, and at simd_level() 2
// two columns per 16-lane AVX-512 vector in tiles of up to 8 rows x 4 columns (OpSimd: the same bits).
#include <algorithm>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

namespace tf::cpu {

namespace {

#if TF_CPU_AVX2
TF_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
TF_AVX2 inline __m256 load8(const uint16_t* p) { return avx2::load_bf16(p); }
inline float scalar(float v) { return v; }
inline float scalar(uint16_t v) { return bf16_to_f32(v); }

// Rows i .. i + R - 1 by columns j .. j + 3 from their lane sums acc (lane l: the k ≡ l (mod 8) below
// k8): the k % 8 tail lane by lane as dot_f32 adds it, then combine8, handed to put(i, j, value).
template <int R, typename W, typename Put>
TF_AVX2 inline void finish_tile(__m256 (&acc)[R][4], const float* x, const W* w, int64_t in_f, int64_t i,
                                int64_t j, int64_t k8, Put& put) {
  for (int r = 0; r < R; ++r) {
    alignas(16) float v[4];
    if (k8 == in_f) {
      _mm_store_ps(v, avx2::combine4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    } else {
      for (int c = 0; c < 4; ++c) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[r][c]);
        const float* xr = x + (i + r) * in_f;
        const W* wr = w + (j + c) * in_f;
        for (int64_t l = 0; k8 + l < in_f; ++l) lanes[l] += xr[k8 + l] * scalar(wr[k8 + l]);
        v[c] = combine8(lanes);
      }
    }
    for (int c = 0; c < 4; ++c) put(i + r, j + c, v[c]);
  }
}

// R rows of x by 4 columns of w: the R x 4 dots dot_f32 / dot_f32_bf16 compute, eight lanes at a time
// (the k % 8 tail lane by lane as they add it, then combine8), handed to put(i, j, value).
template <int R, typename W, typename Put>
TF_AVX2 inline void tile_avx2(const float* x, const W* w, int64_t in_f, int64_t i, int64_t j, Put& put) {
  __m256 acc[R][4];  // the loops unrolled whole, so that acc and wv stay in registers
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t k8 = in_f / 8 * 8;
  for (int64_t k = 0; k < k8; k += 8) {
    __m256 wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) wv[c] = load8(w + (j + c) * in_f + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + (i + r) * in_f + k);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_add_ps(acc[r][c], _mm256_mul_ps(xv, wv[c]));
    }
  }
  finish_tile<R>(acc, x, w, in_f, i, j, k8, put);
}

// Columns [j0, j0 + 4 m) of rows [i0, i1) in 2 x 4 tiles (the last odd row 1 x 4); returns where the
// columns this leaves (fewer than 4) begin.
template <typename W, typename Put>
TF_AVX2 int64_t tiles_avx2(const float* x, const W* w, int64_t in_f, int64_t i0, int64_t i1, int64_t j0,
                           int64_t j1, Put& put) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    int64_t i = i0;
    for (; i + 2 <= i1; i += 2) tile_avx2<2>(x, w, in_f, i, j, put);
    if (i < i1) tile_avx2<1>(x, w, in_f, i, j, put);
  }
  return j;
}

// tile_avx2's dots with two columns per 16-lane vector: lanes 0-7 hold column j + 2h's eight lane sums and
// lanes 8-15 column j + 2h + 1's, each lane the same products added in the same order; x's eight values
// broadcast to both halves.
template <int R, typename W, typename Put>
TF_AVX512 inline void tile_avx512(const float* x, const W* w, int64_t in_f, int64_t i, int64_t j, Put& put) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t k8 = in_f / 8 * 8;
  const W* w0 = w + j * in_f;
  for (int64_t k = 0; k < k8; k += 8) {
    const __m512 w01 = avx512::load8x2(w0 + k, w0 + in_f + k);
    const __m512 w23 = avx512::load8x2(w0 + 2 * in_f + k, w0 + 3 * in_f + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = avx512::dup8(x + (i + r) * in_f + k);
      acc[r][0] = _mm512_add_ps(acc[r][0], _mm512_mul_ps(xv, w01));
      acc[r][1] = _mm512_add_ps(acc[r][1], _mm512_mul_ps(xv, w23));
    }
  }
  __m256 a8[R][4];
  for (int r = 0; r < R; ++r) {
    a8[r][0] = avx512::lo(acc[r][0]);
    a8[r][1] = avx512::hi(acc[r][0]);
    a8[r][2] = avx512::lo(acc[r][1]);
    a8[r][3] = avx512::hi(acc[r][1]);
  }
  finish_tile<R>(a8, x, w, in_f, i, j, k8, put);
}

template <typename W, typename Put>
TF_AVX512 int64_t tiles_avx512(const float* x, const W* w, int64_t in_f, int64_t i0, int64_t i1, int64_t j0,
                               int64_t j1, Put& put) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) tile_avx512<8>(x, w, in_f, i, j, put);
    for (; i + 2 <= i1; i += 2) tile_avx512<2>(x, w, in_f, i, j, put);
    if (i < i1) tile_avx512<1>(x, w, in_f, i, j, put);
  }
  return j;
}
#endif

}  // namespace

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  TF_CHECK(x.rank() == 2 && w.rank() == 2 && out.rank() == 2);
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  TF_CHECK(w.dim(1) == in_f && out.dim(0) == n && out.dim(1) == out_f);
  TF_CHECK(is_float_act(x.dtype) && is_float_act(w.dtype) && is_float_act(out.dtype));
  if (bias) TF_CHECK(bias->numel() == out_f && is_float_act(bias->dtype));
  if (n == 0 || out_f == 0) return;

  // x as f32 once ([n, in_f]); bf16 -> f32 is exact.
  std::vector<float> xf(static_cast<size_t>(n * in_f));
  load_f32_row(x, 0, n * in_f, xf.data());
  std::vector<float> bf;
  if (bias) {
    bf.resize(static_cast<size_t>(out_f));
    load_f32_row(*bias, 0, out_f, bf.data());
  }
  const bool w_bf16 = w.dtype == DType::BF16;
  const bool o_bf16 = out.dtype == DType::BF16;
  auto put = [&](int64_t i, int64_t j, float acc) {
    if (bias) acc += bf[static_cast<size_t>(j)];
    if (o_bf16)
      out.as<uint16_t>()[i * out_f + j] = f32_to_bf16(acc);
    else
      out.as<float>()[i * out_f + j] = acc;
  };
  const bool vec = TF_CPU_AVX2 && simd_on();
  const bool v512 = simd_level() >= 2;
  constexpr int64_t kRowBlock = 32;  // cache tiling only: each element's arithmetic is unchanged
  constexpr int64_t kColBlock = 16;
  const int64_t n_col_blocks = (out_f + kColBlock - 1) / kColBlock;
  pool.parallel_for(n_col_blocks, [&](int64_t cb0, int64_t cb1) {
    const int64_t j0 = cb0 * kColBlock, j1 = std::min(out_f, cb1 * kColBlock);
    for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
      const int64_t i1 = std::min(n, i0 + kRowBlock);
      int64_t j = j0;
#if TF_CPU_AVX2
      if (vec && v512)
        j = w_bf16 ? tiles_avx512(xf.data(), w.as<const uint16_t>(), in_f, i0, i1, j0, j1, put)
                   : tiles_avx512(xf.data(), w.as<const float>(), in_f, i0, i1, j0, j1, put);
      else if (vec)
        j = w_bf16 ? tiles_avx2(xf.data(), w.as<const uint16_t>(), in_f, i0, i1, j0, j1, put)
                   : tiles_avx2(xf.data(), w.as<const float>(), in_f, i0, i1, j0, j1, put);
#endif
      for (; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) {
          const float* xr = xf.data() + i * in_f;
          put(i, j,
              w_bf16 ? dot_f32_bf16(xr, w.as<const uint16_t>() + j * in_f, in_f)
                     : dot_f32(xr, w.as<const float>() + j * in_f, in_f));
        }
    }
  });
}

}  // namespace tf::cpu
