// act / act_mul (backend/ops.h, ActKind): the CPU op against the formula written out here with
// ActKind's rounding points, bit for bit, with planted controls (a rounding point left out must be
// seen); then against Transformers' ACT2FN itself where the oracle's probe is present
// (acts.safetensors in tests/golden/acts/, made by tools/reference/act_goldens.py).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "io/weight_map.h"
#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

const ActKind kKinds[] = {ActKind::kSilu,    ActKind::kGelu,      ActKind::kGeluTanh,
                          ActKind::kGeluNew, ActKind::kQuickGelu, ActKind::kRelu};

float r(float v, DType dt) { return dt == DType::BF16 ? round_bf16(v) : v; }

// The formulas of ActKind as written in ops.h (glibc float functions, the CPU reference's default).
float formula(ActKind k, float x, DType dt) {
  const float beta = 0.7978845608028654f;
  switch (k) {
    case ActKind::kSilu:
      return r(x / (1.0f + std::exp(-x)), dt);
    case ActKind::kGelu:
      return r(x * 0.5f * (1.0f + std::erf(x * 0.70710678118654752440f)), dt);
    case ActKind::kGeluTanh:
      return r(0.5f * x * (1.0f + std::tanh(beta * (x + 0.044715f * x * x * x))), dt);
    case ActKind::kGeluNew: {
      const float c = r(r(x * x, dt) * x, dt), d = r(0.044715f * c, dt), e = r(x + d, dt),
                  f = r(beta * e, dt);
      const float t = r(std::tanh(f), dt), h = r(1.0f + t, dt);
      return r(r(0.5f * x, dt) * h, dt);
    }
    case ActKind::kQuickGelu: {
      const float z = r(1.702f * x, dt), s = r(1.0f / (1.0f + std::exp(-z)), dt);
      return r(x * s, dt);
    }
    case ActKind::kRelu:
      return x < 0.0f ? 0.0f : x;
  }
  return NAN;
}

// Planted controls: each kind's formula with one of its rounding points left out.
float control(ActKind k, float x, DType dt) {
  const float beta = 0.7978845608028654f;
  switch (k) {
    case ActKind::kGeluNew:  // gelu_pytorch_tanh's single rounding
      return r(0.5f * x * (1.0f + std::tanh(beta * (x + 0.044715f * x * x * x))), dt);
    case ActKind::kQuickGelu:  // 1.702 * x not rounded
      return r(x * r(1.0f / (1.0f + std::exp(-1.702f * x)), dt), dt);
    case ActKind::kRelu:  // a leaky relu
      return x < 0.0f ? 0.01f * x : x;
    default:  // the neighbouring kind
      return formula(k == ActKind::kGeluTanh ? ActKind::kGelu : ActKind::kGeluTanh, x, dt);
  }
}

std::vector<float> run(Backend& be, ActKind k, const Buffer& x, const Buffer* up, bool in_place) {
  auto dx = upload_new(be, x);
  DeviceBuffer du = up ? upload_new(be, *up) : DeviceBuffer{};
  auto out = be.alloc(x.dtype(), x.shape());
  const Tensor& o = in_place ? dx.tensor() : out.tensor();
  if (up)
    be.act_mul(dx, du, k, o);
  else
    be.act(dx, k, o);
  return host_f32(be, o);
}

int64_t count_bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], 4) != 0;
  return n;
}

TEST(OpActivation, EveryKindIsItsFormulaBitForBit) {
  auto be = make_cpu_backend();
  for (DType dt : {DType::BF16, DType::F32})
    for (int64_t n : {1, 13, 5000}) {  // 5000 spans more than one internal chunk
      Buffer x = randn(dt, {n}, 71, 3.0f), up = randn(dt, {n}, 72, 2.0f);
      const float edges[] = {0.0f, -0.0f, 10.0f, -10.0f, 30.0f, -30.0f, 88.7f, -88.7f, 1e-20f, -1e-20f};
      for (int64_t i = 0; i < std::min<int64_t>(n, std::size(edges)); ++i) store_f32(x.view(), i, edges[i]);
      for (ActKind k : kKinds) {
        SCOPED_TRACE(std::string(act_kind_name(k)) + " " + std::string(dtype_name(dt)) +
                     " n=" + std::to_string(n));
        std::vector<float> want(n), want_mul(n), ctl(n), ctl_mul_one(n);
        for (int64_t i = 0; i < n; ++i) {
          const float xi = load_f32(x.view(), i), ui = load_f32(up.view(), i);
          want[i] = formula(k, xi, dt);
          want_mul[i] = r(want[i] * ui, dt);
          ctl[i] = control(k, xi, dt);
          // act_mul's control: the product of the unrounded activation, rounded once.
          ctl_mul_one[i] = r(formula(k, xi, DType::F32) * ui, dt);
        }
        for (bool in_place : {false, true}) {
          EXPECT_EQ(count_bits_differ(run(*be, k, x, nullptr, in_place), want), 0) << "act";
          EXPECT_EQ(count_bits_differ(run(*be, k, x, &up, in_place), want_mul), 0) << "act_mul";
        }
        if (n == 5000 && dt == DType::BF16) {  // the comparison sees a rounding point left out
          EXPECT_GT(count_bits_differ(ctl, want), 0) << "planted control (act) not caught";
          if (k != ActKind::kRelu) {
            EXPECT_GT(count_bits_differ(ctl_mul_one, want_mul), 0) << "planted control (act_mul) not caught";
          }
        }
      }
    }
}

// The single-op kinds against float64 math (the formulas' meaning, not only their f32 arithmetic).
TEST(OpActivation, MatchesFloat64Math) {
  auto be = make_cpu_backend();
  const std::function<double(double)> math[] = {
      [](double x) { return x / (1 + std::exp(-x)); },
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
      [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); },
      nullptr,
      nullptr,
      [](double x) { return std::max(x, 0.0); }};
  for (DType dt : {DType::BF16, DType::F32}) {
    Buffer x = randn(dt, {4096}, 73, 1.0f);
    for (int64_t i = 0; i < x.numel(); ++i)  // [-3, 3]: further out 1 + erf/tanh cancels in f32
      store_f32(x.view(), i, std::clamp(load_f32(x.view(), i), -3.0f, 3.0f));
    for (size_t k = 0; k < std::size(kKinds); ++k) {
      if (!math[k]) continue;
      SCOPED_TRACE(std::string(act_kind_name(kKinds[k])) + " " + std::string(dtype_name(dt)));
      std::vector<double> ref(4096);
      for (int64_t i = 0; i < 4096; ++i) ref[i] = rnd64(math[k](load_f32(x.view(), i)), dt);
      EXPECT_MATCHES_REF(run(*be, kKinds[k], x, nullptr, false), ref, dt);
    }
  }
}

// Transformers' ACT2FN on the CPU (the oracle's probe: every bf16 value with 2^-8 <= |x| < 16 and edge
// values). bf16 results agree bit for bit but where PyTorch's vectorised exp/erf/tanh (Sleef) and glibc's
// round differently: at most 1 bf16 ulp (2 after the gated product's second rounding), in at most 1 % of
// the elements (measured 2026-12-02: erf-GELU 24/3088, tanh-GELU 4/3088, the others 0).
TEST(OpActivation, MatchesTransformersAct2fn) {
  const std::string path = std::string(TF_SOURCE_DIR) + "/tests/golden/acts/acts.safetensors";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "no oracle probe at " << path << " (tools/reference/act_goldens.py)";
  auto wm = WeightMap::open_files({path});
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  auto host = [&](const std::string& name) {
    const TensorInfo* ti = wm->info(name);
    EXPECT_TRUE(ti) << name;
    Buffer b(ti->dtype, ti->shape);
    std::memcpy(b.data(), ti->data, b.nbytes());
    return b;
  };
  auto be = make_cpu_backend();
  const Buffer x = host("x"), up = host("up");
  ASSERT_EQ(x.dtype(), DType::BF16);
  for (ActKind k : kKinds) {
    for (bool gated : {false, true}) {
      const std::string name = std::string(act_kind_name(k)) + (gated ? ".act_mul" : ".act");
      const std::vector<float> hf = to_f32_vector(host(name).view());
      const std::vector<float> got = run(*be, k, x, gated ? &up : nullptr, false);
      // ulp distance on the ordered (sign-magnitude) bf16 patterns. In the negative tails of the GELUs
      // the output is what is left of x·(1 + erf) or x·(1 + tanh) after cancellation: there the f32
      // error of either library is absolute, ~|x|·2^-24 per ulp of erf/tanh, and a few such ulps are
      // many ulps of the tiny result. Such elements count as one-ulp differences when within |x|·2^-20.
      auto ordered = [](uint16_t u) {
        return (u & 0x8000u) ? -static_cast<int64_t>(u & 0x7fffu) : int64_t{u};
      };
      int64_t differ = 0, worst = 0;
      for (size_t i = 0; i < hf.size(); ++i) {
        const int64_t a = ordered(f32_to_bf16(got[i])), b = ordered(f32_to_bf16(hf[i]));
        if (a == b) continue;
        ++differ;
        const double xi = std::fabs(static_cast<double>(load_f32(x.view(), static_cast<int64_t>(i))));
        const bool cancel = std::fabs(static_cast<double>(got[i]) - hf[i]) <= std::ldexp(xi, -20);
        worst = std::max(worst, cancel ? int64_t{1} : std::abs(a - b));
      }
      std::printf("  %-26s %lld/%zu elements differ from HF, max %lld ulp\n", name.c_str(),
                  static_cast<long long>(differ), hf.size(), static_cast<long long>(worst));
      EXPECT_LE(worst, gated ? 2 : 1) << name;
      EXPECT_LE(differ * 100, static_cast<int64_t>(hf.size())) << name;
      if (k == ActKind::kRelu) {
        EXPECT_EQ(differ, 0) << name;
      }
      // Planted control: gelu_new with gelu_pytorch_tanh's single rounding is told apart from HF.
      if (k == ActKind::kGeluNew && !gated) {
        const std::vector<float> other = run(*be, ActKind::kGeluTanh, x, nullptr, false);
        EXPECT_GT(count_bits_differ(other, hf) * 200, static_cast<int64_t>(hf.size()))
            << "control not caught";
      }
    }
  }
}

}  // namespace
