// Shared by the CUDA contract tests (cuda_contract_test.cpp, cuda_contract_qwen_test.cpp): the
// CudaContract fixture, which holds the "cuda" backend and the CPU reference (every test skips where
// create_backend("cuda") fails: no CUDA build or no device), a bit-level comparator and host-buffer
// helpers. Nothing here names a CUDA header, so the tests build without CUDA.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/test_hooks.h"
#include "op_test_util.h"

namespace tf::cudatest {

using optest::randn;

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// ---- comparison ------------------------------------------------------------------------------
// Element by element: BF16 compares the 16-bit patterns, F32 the 32-bit patterns, I32 the values.
// The ulp distance is the difference of the patterns read as ordered (sign-magnitude) integers, so
// +0 and -0 differ in bits at distance 0. A NaN against anything else counts as kNanUlp.
constexpr int64_t kNanUlp = int64_t{1} << 40;

struct Diff {
  std::string error;    // set when the buffers are not comparable (dtype or shape)
  int64_t n = 0;        // elements compared
  int64_t differ = 0;   // elements whose bits differ
  int64_t max_ulp = 0;  // largest ordered-int distance
  int64_t first = -1;   // first differing element
  std::string first_ref, first_got;
  std::string str() const {
    if (!error.empty()) return error;
    std::string s =
        cat("bits differ in ", differ, "/", n, " elements (", 100.0 * differ / std::max<int64_t>(n, 1),
            "%), max ulp ", max_ulp >= kNanUlp ? std::string("NaN") : std::to_string(max_ulp));
    if (first >= 0) s += cat("; first at ", first, ": cpu ", first_ref, " vs cuda ", first_got);
    return s;
  }
};

inline int64_t ordered(uint32_t bits, int sign_shift) {
  const uint32_t sign = 1u << sign_shift;
  return (bits & sign) ? -static_cast<int64_t>(bits & (sign - 1)) : static_cast<int64_t>(bits);
}

inline std::string elem_str(const Buffer& b, int64_t i) {
  char s[64];
  if (b.dtype() == DType::BF16) {
    const uint16_t u = b.as<uint16_t>()[i];
    std::snprintf(s, sizeof s, "%.9g (0x%04x)", static_cast<double>(bf16_to_f32(u)), u);
  } else if (b.dtype() == DType::F32) {
    uint32_t u;
    std::memcpy(&u, b.as<float>() + i, 4);
    std::snprintf(s, sizeof s, "%.9g (0x%08x)", static_cast<double>(b.as<float>()[i]), u);
  } else {
    std::snprintf(s, sizeof s, "%d", b.as<int32_t>()[i]);
  }
  return s;
}

// nan_equal: any two NaNs count as equal (NaN payloads are not part of the contract).
inline Diff diff(const Buffer& ref, const Buffer& got, bool nan_equal = false) {
  Diff d;
  if (ref.dtype() != got.dtype() || ref.shape() != got.shape()) {
    d.error = cat("not comparable: cpu ", dtype_name(ref.dtype()), shape_str(ref.shape()), " vs cuda ",
                  dtype_name(got.dtype()), shape_str(got.shape()));
    return d;
  }
  const DType dt = ref.dtype();
  if (dt != DType::BF16 && dt != DType::F32 && dt != DType::I32) {
    d.error = cat("diff: unsupported dtype ", dtype_name(dt));
    return d;
  }
  d.n = ref.numel();
  for (int64_t i = 0; i < d.n; ++i) {
    int64_t a, b;
    bool nan_a = false, nan_b = false;
    if (dt == DType::BF16) {
      const uint16_t x = ref.as<uint16_t>()[i], y = got.as<uint16_t>()[i];
      if (x == y) continue;
      nan_a = (x & 0x7fffu) > 0x7f80u;
      nan_b = (y & 0x7fffu) > 0x7f80u;
      a = ordered(x, 15);
      b = ordered(y, 15);
    } else if (dt == DType::F32) {
      const uint32_t x = ref.as<uint32_t>()[i], y = got.as<uint32_t>()[i];
      if (x == y) continue;
      nan_a = (x & 0x7fffffffu) > 0x7f800000u;
      nan_b = (y & 0x7fffffffu) > 0x7f800000u;
      a = ordered(x, 31);
      b = ordered(y, 31);
    } else {
      a = ref.as<int32_t>()[i];
      b = got.as<int32_t>()[i];
      if (a == b) continue;
    }
    if (nan_equal && nan_a && nan_b) continue;
    if (d.differ++ == 0) {
      d.first = i;
      d.first_ref = elem_str(ref, i);
      d.first_got = elem_str(got, i);
    }
    d.max_ulp = std::max(d.max_ulp, (nan_a || nan_b) ? kNanUlp : std::abs(a - b));
  }
  return d;
}

// Exact ops: every element bit-identical to the CPU's.
inline ::testing::AssertionResult Exact(const Buffer& ref, const Buffer& got, bool nan_equal = false) {
  const Diff d = diff(ref, got, nan_equal);
  if (d.error.empty() && d.differ == 0) return ::testing::AssertionSuccess() << d.str();
  return ::testing::AssertionFailure() << "not bit-identical: " << d.str();
}

// Ops with transcendental functions. The fixture runs the CPU reference with
// CpuTranscendentals::kDouble (exp, erf, ... evaluated in double and rounded once, as the CUDA
// kernels do), so these must be bit-identical as well; the counts are printed either way. (With the
// CPU's default glibc float functions the two backends differ by 1-2 ulp in a few percent of the
// elements of these ops, more after the chunked delta rule's cancellations; see tools/cuda_check.)
inline ::testing::AssertionResult Close(const Buffer& ref, const Buffer& got, const std::string& what) {
  const Diff d = diff(ref, got);
  std::printf("[ contract ] %s: %s\n", what.c_str(), d.str().c_str());
  if (d.error.empty() && d.differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": not bit-identical: " << d.str();
}

// Tensor-core ops are held to the CPU by a stated tolerance instead of bits (cuda_contract_tc_test.cpp).
// NearAbs: every element within abs_tol of the CPU's (values compared as f32); prints the largest
// and the mean absolute difference.
inline ::testing::AssertionResult NearAbs(const Buffer& ref, const Buffer& got, const std::string& what,
                                          double abs_tol) {
  if (ref.dtype() != got.dtype() || ref.shape() != got.shape())
    return ::testing::AssertionFailure() << what << ": not comparable";
  double worst = 0, sum = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = load_f32(ref.view(), i), b = load_f32(got.view(), i);
    const double e =
        (std::isnan(a) || std::isnan(b)) ? (std::isnan(a) && std::isnan(b) ? 0 : INFINITY) : std::fabs(a - b);
    sum += e;
    if (e > worst || at < 0) worst = e, at = i;
  }
  const Diff d = diff(ref, got);
  std::printf("[ contract ] %s: max |diff| %.3g at %lld (tolerance %.3g), mean %.3g; %s\n", what.c_str(),
              worst, static_cast<long long>(at), abs_tol, sum / std::max<int64_t>(ref.numel(), 1),
              d.str().c_str());
  if (worst <= abs_tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": max |diff| " << worst << " > " << abs_tol;
}

// The gated delta rule's tolerance (its reason: cuda_contract_qwen_test.cpp, above GatedDeltaRuleSeq), per
// element of an output or state: |cuda - cpu| <= ulp_dtype(max(|cpu|, |cuda|)) + 2^-15 max|cpu|.
inline double delta_bound(double cpu, double cuda, DType dt, double max_ref) {
  const double a = std::max(std::fabs(cpu), std::fabs(cuda));
  const double ulp = a > 0 ? std::ldexp(1.0, std::ilogb(a) - (dt == DType::BF16 ? 7 : 23)) : 0.0;
  return ulp + std::ldexp(max_ref, -15);
}

// The tolerance above; prints the bit differences, the largest |diff| / bound and max|cpu|.
inline ::testing::AssertionResult NearDelta(const Buffer& ref, const Buffer& got, const std::string& what) {
  const Diff d = diff(ref, got);
  if (!d.error.empty()) return ::testing::AssertionFailure() << what << ": " << d.error;
  double m = 0, worst = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(load_f32(ref.view(), i))));
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = load_f32(ref.view(), i), b = load_f32(got.view(), i);
    const double e = std::fabs(a - b);
    worst = std::max(worst, std::isnan(e) ? INFINITY : e / delta_bound(a, b, ref.dtype(), m));
  }
  std::printf("[ contract ] %s: %s; largest |diff| / bound %.3f (max|cpu| %.3g)\n", what.c_str(),
              d.str().c_str(), worst, m);
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": outside the tolerance (|diff| / bound " << worst << ")";
}

// Planted controls: the comparator must see a difference.
inline ::testing::AssertionResult Differs(const Buffer& ref, const Buffer& got) {
  const Diff d = diff(ref, got);
  if (d.error.empty() && d.differ > 0) return ::testing::AssertionSuccess() << d.str();
  return ::testing::AssertionFailure() << "planted control not caught: " << d.str();
}

// ---- host buffers ----------------------------------------------------------------------------
inline Buffer clone(const Tensor& t) {
  Buffer b(t.dtype, t.shape);
  if (t.nbytes()) std::memcpy(b.data(), t.data, t.nbytes());
  return b;
}

// Rows [r0, r1) of a host buffer, as a new buffer.
inline Buffer rows_of(const Buffer& b, int64_t r0, int64_t r1) { return clone(b.view().slice_rows(r0, r1)); }

// A copy with element i moved by `ulps` in its bit pattern (the smallest change the dtype allows).
inline Buffer bump(const Buffer& b, int64_t i, int ulps = 1) {
  Buffer c = clone(b);
  if (b.dtype() == DType::BF16)
    c.as<uint16_t>()[i] = static_cast<uint16_t>(c.as<uint16_t>()[i] + ulps);
  else
    c.as<uint32_t>()[i] = static_cast<uint32_t>(c.as<uint32_t>()[i] + static_cast<uint32_t>(ulps));
  return c;
}

// Planted-control input: x with one element in [begin, end) moved by one ulp: the first whose bump
// changes the CPU result run(x) at all (in bf16 a one-ulp input change can round away).
template <class Run>
Buffer visible_bump(const Buffer& x, int64_t begin, int64_t end, const Run& run) {
  const Buffer base = run(x);
  for (int64_t i = begin; i < end; ++i) {
    Buffer p = bump(x, i);
    if (diff(base, run(p)).differ > 0) return p;
  }
  ADD_FAILURE() << "no one-ulp bump in [" << begin << ", " << end << ") changes the CPU result";
  return clone(x);
}

// A copy with element i's value changed by `delta`.
inline Buffer poke(const Buffer& b, int64_t i, float delta) {
  Buffer c = clone(b);
  store_f32(c.view(), i, load_f32(c.view(), i) + delta);
  return c;
}

inline Buffer uniform(DType dt, Shape s, uint32_t seed, float lo, float hi) {
  Buffer b(dt, std::move(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i) store_f32(b.view(), i, u(rng));
  return b;
}

inline Buffer i32(Shape s, const std::vector<int32_t>& v) {
  Buffer b(DType::I32, std::move(s));
  TF_CHECK(static_cast<int64_t>(v.size()) == b.numel());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// Random ints in [lo, hi].
inline std::vector<int32_t> rand_ints(int64_t n, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// Device tensor -> host, after the backend's queued work.
inline Buffer fetch(Backend& be, const Tensor& t) {
  be.synchronize();
  return download_new(be, t);
}

// ---- fixture ---------------------------------------------------------------------------------
class CudaContract : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (dev_ || !skip_.empty()) return;
    auto b = create_backend("cuda");
    if (!b.ok()) {
      skip_ = "no CUDA backend: " + b.error().message;
      return;
    }
    dev_ = std::move(b).value();
    cpu_ = make_cpu_backend();
    set_cpu_transcendentals(CpuTranscendentals::kDouble);
  }
  static void TearDownTestSuite() {
    set_cpu_transcendentals(CpuTranscendentals::kLibm);
    dev_.reset();
    cpu_.reset();
  }
  void SetUp() override {
    if (!dev_) GTEST_SKIP() << skip_;
  }
  static Backend& dev() { return *dev_; }
  static Backend& cpu() { return *cpu_; }

 private:
  static inline std::unique_ptr<Backend> dev_, cpu_;
  static inline std::string skip_;
};

// The sweep of the fused decode forms' contract tests (fused_linear_test.cpp, layer_tail_test.cpp):
// body(true, 0) at the device's grid, body(true, 3) with 3 blocks walking every tile
// (test_hooks::set_cuda_linear_small_grid_cap), then body(false, 0) with the fused forms off; the grid and
// the fused forms are restored after, whatever fails.
template <class F>
void sweep_fused_forms(F&& body) {
  struct Restore {
    ~Restore() {
      test_hooks::set_cuda_linear_small_grid_cap(0);
      test_hooks::set_cuda_fused_linear(true);
    }
  } restore;
  for (int cap : {0, 3}) {
    ASSERT_TRUE(test_hooks::set_cuda_linear_small_grid_cap(cap));
    body(true, cap);
  }
  ASSERT_TRUE(test_hooks::set_cuda_linear_small_grid_cap(0));
  ASSERT_TRUE(test_hooks::set_cuda_fused_linear(false));
  body(false, 0);
}

}  // namespace tf::cudatest
