// simd_level (simd.h): the CPU's AVX2 / AVX-512, once; TF_CPU_SIMD and the test hook cap it.
#include "backend/cpu/simd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/fmath.h"
#include "backend/test_hooks.h"
#include "tensor/dtype.h"

namespace tf::cpu {
namespace {

// What the CPU offers: 0 neither, 1 AVX2, 2 AVX2 and AVX-512 (F, BW, DQ, VL: what TF_AVX512 code uses).
int cpu_level() {
#if TF_CPU_AVX2
  static const int level = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) return 0;
    const bool v512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return v512 ? 2 : 1;
  }();
  return level;
#else
  return 0;
#endif
}

std::atomic<int>& forced() {  // -1: the CPU and the environment decide; 0 / 1 / 2: a test set the cap
  static std::atomic<int> f{-1};
  return f;
}

#if TF_CPU_AVX2
TF_AVX2 void bf16_row_avx2(const uint16_t* s, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

TF_AVX2 inline __m256d lin(double a, double b, __m256d r) {  // a + b r
  return _mm256_add_pd(_mm256_set1_pd(a), _mm256_mul_pd(_mm256_set1_pd(b), r));
}

// e^x for four x in double: n = round(x / ln 2), r = x - n ln 2 with ln 2 in two parts (n · hi exact: hi has
// 32 significant bits, |n| <= 128), e^r by its Taylor series to r^11 (|r| <= 0.35: truncation < 2^-46 of
// e^r; each 1/k! a correctly rounded double, summed in Estrin's form: pairs, then pairs of pairs, a short
// dependency chain), times 2^n built in the exponent field.
TF_AVX2 inline __m256d exp4_pd(__m256d x) {
  const __m256d shift = _mm256_set1_pd(0x1.8p52);  // adding it rounds to an integer in the low bits
  const __m256d kd = _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(0x1.71547652b82fep+0)), shift);
  const __m256d n = _mm256_sub_pd(kd, shift);
  __m256d r = _mm256_sub_pd(x, _mm256_mul_pd(n, _mm256_set1_pd(0x1.62e42feep-1)));
  r = _mm256_sub_pd(r, _mm256_mul_pd(n, _mm256_set1_pd(0x1.a39ef35793c76p-33)));
  const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
  const __m256d q0 = lin(1.0, 1.0, r), q1 = lin(0x1.0p-1, 0x1.5555555555555p-3, r),  // 1/0! 1/1!, 1/2! 1/3!
      q2 = lin(0x1.5555555555555p-5, 0x1.1111111111111p-7, r),                       // 1/4! 1/5!
      q3 = lin(0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13, r),                     // 1/6! 1/7!
      q4 = lin(0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, r),                     // 1/8! 1/9!
      q5 = lin(0x1.27e4fb7789f5cp-22, 0x1.ae64567f544e4p-26, r);                     // 1/10! 1/11!
  const __m256d s0 = _mm256_add_pd(q0, _mm256_mul_pd(q1, r2)), s1 = _mm256_add_pd(q2, _mm256_mul_pd(q3, r2)),
                s2 = _mm256_add_pd(q4, _mm256_mul_pd(q5, r2));
  const __m256d p = _mm256_add_pd(_mm256_add_pd(s0, _mm256_mul_pd(s1, r4)), _mm256_mul_pd(s2, r8));
  const __m256i bits =
      _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(kd), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

// The lanes exp4_pd may not decide (exp_row): x outside [-87, 88] or NaN, or y within 2^21 units of its last
// place (2^-31 of y or less) from a halfway point between floats (the low 29 bits of its bits near 2^28).
TF_AVX2 inline int undecided4(__m256d x, __m256d y, bool guard) {
  const __m256d in = _mm256_and_pd(_mm256_cmp_pd(x, _mm256_set1_pd(-87.0), _CMP_GE_OQ),
                                   _mm256_cmp_pd(x, _mm256_set1_pd(88.0), _CMP_LE_OQ));
  int bad = ~_mm256_movemask_pd(in) & 0xF;
  if (guard) {
    const __m256i low = _mm256_and_si256(_mm256_castpd_si256(y), _mm256_set1_epi64x(0x1FFFFFFF));
    const __m256i off = _mm256_sub_epi64(low, _mm256_set1_epi64x((int64_t{1} << 28) - (int64_t{1} << 21)));
    const __m256i near = _mm256_and_si256(_mm256_cmpgt_epi64(off, _mm256_set1_epi64x(-1)),
                                          _mm256_cmpgt_epi64(_mm256_set1_epi64x(int64_t{1} << 22), off));
    bad |= _mm256_movemask_pd(_mm256_castsi256_pd(near));
  }
  return bad;
}

TF_AVX2 void exp_row_avx2(const float* s, float sub, int64_t n, float* dst, bool guard) {
  const __m256 vsub = _mm256_set1_ps(sub);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(s + i), vsub);  // s[i] - sub, as the scalar statement
    const __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(t)),
                  x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(t, 1));
    const __m256d y0 = exp4_pd(x0), y1 = exp4_pd(x1);
    const int bad = undecided4(x0, y0, guard) | undecided4(x1, y1, guard) << 4;
    alignas(32) float tv[8];
    _mm256_store_ps(tv, t);
    _mm256_storeu_ps(dst + i, _mm256_set_m128(_mm256_cvtpd_ps(y1), _mm256_cvtpd_ps(y0)));
    if (bad)
      for (int l = 0; l < 8; ++l)
        if (bad >> l & 1) dst[i + l] = fm::exp(tv[l]);
  }
  for (; i < n; ++i) dst[i] = fm::exp(s[i] - sub);
}

TF_AVX2 float max_row_avx2(const float* p, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(p + i), m);  // a NaN lane keeps m
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = -INFINITY;
  for (float v : lanes) r = std::max(r, v);
  for (; i < n; ++i) r = std::max(r, p[i]);
  return r;
}
#endif

}  // namespace

void bf16_row_to_f32(const uint16_t* s, int64_t n, float* dst) {
#if TF_CPU_AVX2
  if (n >= 8 && simd_on()) {
    bf16_row_avx2(s, n, dst);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

void exp_row(const float* s, float sub, int64_t n, float* dst, bool guard) {
#if TF_CPU_AVX2
  if (n >= 8 && simd_on()) {
    exp_row_avx2(s, sub, n, dst, guard);
    return;
  }
#endif
  (void)guard;
  for (int64_t i = 0; i < n; ++i) dst[i] = fm::exp(s[i] - sub);
}

float max_row(const float* p, int64_t n) {
#if TF_CPU_AVX2
  if (n >= 8 && simd_on()) return max_row_avx2(p, n);
#endif
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, p[i]);
  return m;
}

int simd_level() {
  static const int production = [] {  // TF_CPU_SIMD: 0 none, avx2 (or 1) at most AVX2, unset the CPU's best
    const char* e = std::getenv("TF_CPU_SIMD");
    int cap = 2;
    if (e && (std::strcmp(e, "0") == 0)) cap = 0;
    if (e && (std::strcmp(e, "avx2") == 0 || std::strcmp(e, "1") == 0)) cap = 1;
    return std::min(cap, cpu_level());
  }();
  const int f = forced().load(std::memory_order_relaxed);
  return f < 0 ? production : std::min(f, cpu_level());
}

bool simd_on() { return simd_level() >= 1; }

}  // namespace tf::cpu

namespace tf::test_hooks {
bool set_cpu_simd(int mode) {
  cpu::forced().store(mode < 0 ? -1 : std::min(mode, 2), std::memory_order_relaxed);
  return cpu::cpu_level() >= std::max(mode, 1);
}
}  // namespace tf::test_hooks
