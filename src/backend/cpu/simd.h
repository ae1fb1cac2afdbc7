// The CPU ops' AVX2 paths: eight f32 lanes that keep the dot order of common.h exactly (lane l sums the
// elements k ≡ l (mod 8) in increasing k, then combine8's tree), with multiplies and adds as separate
// instructions (no FMA: the functions are built for "avx2" only), so every value is the portable code's bit
// for bit. An op takes its AVX2 path when simd_on(); OpSimd (tests/unit/backend/simd_test.cpp) runs each op
// both ways and compares the bits.
#pragma once
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#define TF_CPU_AVX2 1
#define TF_AVX2 __attribute__((target("avx2")))
#define TF_AVX512 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define TF_CPU_AVX2 0
#endif

namespace tf::cpu {

// The widest paths the ops may take: 0 none (the portable statements), 1 AVX2, 2 AVX-512 (ops that have
// such a path; the others take their AVX2 one). The CPU's best unless TF_CPU_SIMD caps it (0: none, avx2:
// at most AVX2) or a test does (test_hooks::set_cpu_simd).
int simd_level();
// simd_level() >= 1.
bool simd_on();

// dst[i] = bf16_to_f32(s[i]) for i < n (exact; eight at a time where simd_on()).
void bf16_row_to_f32(const uint16_t* s, int64_t n, float* dst);

// dst[i] = fm::exp(s[i] - sub) for i < n (dst may be s), bit for bit in either fmath mode, eight at a time
// where simd_on(): each lane's e^x in double (error < 2^-45), rounded to f32; a lane whose double lies within
// 2^-31 (relative) of a halfway point between two floats, or whose x is outside [-87, 88] or NaN, calls
// fm::exp. Both fm::exp forms round a double within 2^-33 of e^x (glibc's expf: 1.7 · 2^-34 before its
// rounding; exp in double: 2^-52), so elsewhere they round to the float the vector lane rounds to (checked
// for all 2^32 floats in both modes on glibc 2.36; OpSimd.ExpRowEqualsTheScalarCalls samples them). `guard`
// false skips the halfway test (a test's planted control: then some lanes must differ).
void exp_row(const float* s, float sub, int64_t n, float* dst, bool guard = true);
// The largest of p[0..n) that is not NaN (-inf if none): a sequential std::max's value, though a zero's sign
// may differ (which e^(x - max) cannot see: x - (+0) and x - (-0) differ only for x = ±0, and e^±0 = 1).
float max_row(const float* p, int64_t n);

#if TF_CPU_AVX2
namespace avx2 {

// Eight bf16 values as f32 (exact: the bits shifted up, as bf16_to_f32).
TF_AVX2 inline __m256 load_bf16(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// combine8 of four lane sets at once: [combine8(a), combine8(b), combine8(c), combine8(d)]. hadd adds
// neighbouring lanes, so the three rounds are combine8's (l0+l1), ((l0+l1)+(l2+l3)) and the two halves.
TF_AVX2 inline __m128 combine4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);      // [a01 a23 b01 b23 | a45 a67 b45 b67]
  const __m256 cd = _mm256_hadd_ps(c, d);      // [c01 c23 d01 d23 | c45 c67 d45 d67]
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // [a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567]
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// dot_f32(a, b_t, n) for the four rows b_t = b + t * stride; n % 8 == 0.
TF_AVX2 inline __m128 dot4(const float* a, const float* b, int64_t stride, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t k = 0; k < n; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k);
    s0 = _mm256_add_ps(s0, _mm256_mul_ps(x, _mm256_loadu_ps(b + k)));
    s1 = _mm256_add_ps(s1, _mm256_mul_ps(x, _mm256_loadu_ps(b + stride + k)));
    s2 = _mm256_add_ps(s2, _mm256_mul_ps(x, _mm256_loadu_ps(b + 2 * stride + k)));
    s3 = _mm256_add_ps(s3, _mm256_mul_ps(x, _mm256_loadu_ps(b + 3 * stride + k)));
  }
  return combine4(s0, s1, s2, s3);
}

// acc[c] += p[0] * v_0[c], then p[1] * v_1[c], p[2] * v_2[c], p[3] * v_3[c] (v_t = v + t * stride), each
// product rounded and added on its own, for c < n; n % 8 == 0.
TF_AVX2 inline void axpy4(float* acc, const float* p, const float* v, int64_t stride, int64_t n) {
  const __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]), p2 = _mm256_set1_ps(p[2]),
               p3 = _mm256_set1_ps(p[3]);
  for (int64_t c = 0; c < n; c += 8) {
    __m256 a = _mm256_loadu_ps(acc + c);
    a = _mm256_add_ps(a, _mm256_mul_ps(p0, _mm256_loadu_ps(v + c)));
    a = _mm256_add_ps(a, _mm256_mul_ps(p1, _mm256_loadu_ps(v + stride + c)));
    a = _mm256_add_ps(a, _mm256_mul_ps(p2, _mm256_loadu_ps(v + 2 * stride + c)));
    a = _mm256_add_ps(a, _mm256_mul_ps(p3, _mm256_loadu_ps(v + 3 * stride + c)));
    _mm256_storeu_ps(acc + c, a);
  }
}

}  // namespace avx2

// AVX-512 forms of the same sums, two rows of eight lanes per 16-lane vector (lanes 0-7 the first row's
// eight lane sums, 8-15 the second's: the same products, added in the same order).
namespace avx512 {
#if !defined(__clang__)  // GCC 12 flags the intrinsics' _mm512_undefined_* starts (every lane is written)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Eight values of a and eight of b as one vector (bf16: exact, as avx2::load_bf16).
TF_AVX512 inline __m512 load8x2(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
TF_AVX512 inline __m512 load8x2(const uint16_t* a, const uint16_t* b) {
  const __m256i h =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// Eight values in both halves.
TF_AVX512 inline __m512 dup8(const float* a) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(a)); }
// The halves as two eight-lane vectors.
TF_AVX512 inline __m256 lo(__m512 v) { return _mm512_castps512_ps256(v); }
TF_AVX512 inline __m256 hi(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }

// avx2::dot4: dot_f32(a, b_t, n) for the four rows b_t = b + t * stride; n % 8 == 0.
TF_AVX512 inline __m128 dot4(const float* a, const float* b, int64_t stride, int64_t n) {
  __m512 s01 = _mm512_setzero_ps(), s23 = s01;
  for (int64_t k = 0; k < n; k += 8) {
    const __m512 x = dup8(a + k);
    s01 = _mm512_add_ps(s01, _mm512_mul_ps(x, load8x2(b + k, b + stride + k)));
    s23 = _mm512_add_ps(s23, _mm512_mul_ps(x, load8x2(b + 2 * stride + k, b + 3 * stride + k)));
  }
  return avx2::combine4(lo(s01), hi(s01), lo(s23), hi(s23));
}

// avx2::axpy4 sixteen elements of acc at a time; n % 16 == 0.
TF_AVX512 inline void axpy4(float* acc, const float* p, const float* v, int64_t stride, int64_t n) {
  const __m512 p0 = _mm512_set1_ps(p[0]), p1 = _mm512_set1_ps(p[1]), p2 = _mm512_set1_ps(p[2]),
               p3 = _mm512_set1_ps(p[3]);
  for (int64_t c = 0; c < n; c += 16) {
    __m512 a = _mm512_loadu_ps(acc + c);
    a = _mm512_add_ps(a, _mm512_mul_ps(p0, _mm512_loadu_ps(v + c)));
    a = _mm512_add_ps(a, _mm512_mul_ps(p1, _mm512_loadu_ps(v + stride + c)));
    a = _mm512_add_ps(a, _mm512_mul_ps(p2, _mm512_loadu_ps(v + 2 * stride + c)));
    a = _mm512_add_ps(a, _mm512_mul_ps(p3, _mm512_loadu_ps(v + 3 * stride + c)));
    _mm512_storeu_ps(acc + c, a);
  }
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
}  // namespace avx512
#endif

}  // namespace tf::cpu
