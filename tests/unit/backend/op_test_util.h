// Helpers for the op contract tests: random inputs, float64 references with explicit rounding
// points, and comparators whose power is shown by planted controls.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "tensor/tensor.h"

namespace tf::optest {

// Host buffer with N(0, sd) values representable in dtype.
inline Buffer randn(DType dt, Shape s, uint32_t seed, float sd = 1.0f) {
  Buffer b(dt, std::move(s));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  for (int64_t i = 0; i < b.numel(); ++i) store_f32(b.view(), i, nd(rng));
  return b;
}

inline std::vector<double> to_f64(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_f32(t, i);
  return v;
}

// Round a float64 reference value to the activation dtype (the rounding point), via f32.
inline double rnd64(double v, DType act) {
  return act == DType::BF16 ? static_cast<double>(round_bf16(static_cast<float>(v))) : v;
}

struct CmpResult {
  bool ok = false;
  std::string detail;
};

// bf16: every element within 1 ulp of the rounded f64 reference and at most 1% (min 1) of the
// elements not bit-equal (f32 vs f64 arithmetic flips a rounding only near a tie).
// f32: every element |got - ref| <= rel_tol * max(|ref|, rms(ref)).
inline CmpResult compare(const std::vector<float>& got, const std::vector<double>& ref, DType dt,
                         double rel_tol = 2e-6) {
  CmpResult r;
  if (got.size() != ref.size()) return {false, "size mismatch"};
  if (dt == DType::BF16) {
    int64_t mism = 0, max_ulp = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const int32_t a = static_cast<int16_t>(f32_to_bf16(got[i]));
      const int32_t b = static_cast<int16_t>(f32_to_bf16(static_cast<float>(ref[i])));
      const int64_t u = std::abs(static_cast<int64_t>(a) - b);
      if (u) ++mism;
      max_ulp = std::max(max_ulp, u);
    }
    const int64_t allowed = std::max<int64_t>(1, static_cast<int64_t>(got.size()) / 100);
    r.ok = max_ulp <= 1 && mism <= allowed;
    r.detail = "bf16 mismatches " + std::to_string(mism) + "/" + std::to_string(got.size()) + ", max ulp " +
               std::to_string(max_ulp);
  } else {
    double ss = 0;
    for (double v : ref) ss += v * v;
    const double rms = ref.empty() ? 0 : std::sqrt(ss / static_cast<double>(ref.size()));
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double den = std::max(std::abs(ref[i]), rms) + 1e-30;
      worst = std::max(worst, std::abs(got[i] - ref[i]) / den);
    }
    r.ok = worst <= rel_tol;
    r.detail = "f32 worst rel err " + std::to_string(worst);
  }
  return r;
}

// Planted control: the same check on a perturbed copy must fail. For bf16, 3% of elements moved by
// one ulp (more than the allowed 1%) plus one by 2 ulps; for f32 one element moved by 1e-4 relative.
inline std::vector<float> perturb(std::vector<float> v, DType dt) {
  if (v.empty()) return v;
  if (dt == DType::BF16) {
    const size_t step = 33;
    for (size_t i = 0; i < v.size(); i += step)
      v[i] = bf16_to_f32(static_cast<uint16_t>(f32_to_bf16(v[i]) + 1));
    v[v.size() / 2] = bf16_to_f32(static_cast<uint16_t>(f32_to_bf16(v[v.size() / 2]) + 2));
  } else {
    v[v.size() / 2] += 1e-4f * (std::abs(v[v.size() / 2]) + 1.0f);
  }
  return v;
}

#define EXPECT_MATCHES_REF(got, ref, dt)                                              \
  do {                                                                                \
    auto r_ = ::tf::optest::compare((got), (ref), (dt));                              \
    EXPECT_TRUE(r_.ok) << r_.detail;                                                  \
    auto c_ = ::tf::optest::compare(::tf::optest::perturb((got), (dt)), (ref), (dt)); \
    EXPECT_FALSE(c_.ok) << "planted control not caught: " << c_.detail;               \
  } while (0)

inline std::vector<float> host_f32(Backend& b, const Tensor& dev) {
  return to_f32_vector(download_new(b, dev).view());
}

inline bool bits_equal(Backend& b, const Tensor& x, const Tensor& y) {
  Buffer hx = download_new(b, x), hy = download_new(b, y);
  return hx.nbytes() == hy.nbytes() && std::memcmp(hx.data(), hy.data(), hx.nbytes()) == 0;
}

}  // namespace tf::optest
