// linear, rms_norm, layer_norm against float64 references with explicit rounding points.
#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

struct LinearCase {
  int64_t n, in_f, out_f;
  DType act, wdt;
  bool bias;
};

TEST(OpLinear, MatchesF64Reference) {
  auto be = make_cpu_backend();
  const LinearCase cases[] = {
      {1, 13, 5, DType::BF16, DType::BF16, false}, {7, 64, 33, DType::BF16, DType::BF16, true},
      {3, 300, 17, DType::F32, DType::F32, true},  {1, 9, 70, DType::F32, DType::F32, false},
      {5, 40, 9, DType::BF16, DType::F32, false},  {2, 8, 8, DType::F32, DType::BF16, true}};
  uint32_t seed = 1;
  for (const auto& c : cases) {
    Buffer x = randn(c.act, {c.n, c.in_f}, seed++), w = randn(c.wdt, {c.out_f, c.in_f}, seed++, 0.2f);
    Buffer b = randn(c.wdt, {c.out_f}, seed++);
    auto dx = upload_new(*be, x), dw = upload_new(*be, w), db = upload_new(*be, b);
    auto out = be->alloc(c.act, {c.n, c.out_f});
    Tensor bt = db.tensor();
    be->linear(dx, dw, c.bias ? &bt : nullptr, out);
    auto xv = to_f64(x), wv = to_f64(w), bv = to_f64(b);
    std::vector<double> ref(static_cast<size_t>(c.n * c.out_f));
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.out_f; ++j) {
        double s = c.bias ? bv[j] : 0.0;
        for (int64_t k = 0; k < c.in_f; ++k) s += xv[i * c.in_f + k] * wv[j * c.in_f + k];
        ref[i * c.out_f + j] = rnd64(s, c.act);
      }
    SCOPED_TRACE("n=" + std::to_string(c.n) + " in=" + std::to_string(c.in_f) +
                 " out=" + std::to_string(c.out_f));
    EXPECT_MATCHES_REF(host_f32(*be, out), ref, c.act);
  }
}

std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& w, int64_t d, double eps,
                            RmsNormKind kind, DType act, bool skip_first_rounding = false) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[r * d + i] * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      const double y = x[r * d + i] * inv;
      out[r * d + i] = kind == RmsNormKind::kWeight
                           ? rnd64(w[i] * (skip_first_rounding ? y : rnd64(y, act)), act)
                           : rnd64(y * (1.0 + w[i]), act);
    }
  }
  return out;
}

TEST(OpRmsNorm, MatchesF64ReferenceWithTwoRoundings) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t d : {1, 7, 64, 130})
      for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight}) {
        const int64_t n = 5;
        Buffer x = randn(act, {n, d}, 11 + d, 3.0f), w = randn(act, {d}, 12 + d);
        auto dx = upload_new(*be, x), dw = upload_new(*be, w);
        auto out = be->alloc(act, {n, d});
        be->rms_norm(dx, dw, 1e-6f, kind, out);
        auto ref = rms_ref(to_f64(x), to_f64(w), d, 1e-6, kind, act);
        SCOPED_TRACE("d=" + std::to_string(d) + " kind=" + std::to_string(static_cast<int>(kind)));
        EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
      }
}

// The bf16 rounding point between normalisation and weight multiply is observable: a reference
// without it is rejected by the same comparator.
TEST(OpRmsNorm, Bf16IntermediateRoundingIsObservable) {
  auto be = make_cpu_backend();
  const int64_t n = 16, d = 256;
  Buffer x = randn(DType::BF16, {n, d}, 5), w = randn(DType::BF16, {d}, 6, 1.5f);
  auto dx = upload_new(*be, x), dw = upload_new(*be, w);
  auto out = be->alloc(DType::BF16, {n, d});
  be->rms_norm(dx, dw, 1e-5f, RmsNormKind::kWeight, out);
  auto got = host_f32(*be, out);
  EXPECT_TRUE(
      compare(got, rms_ref(to_f64(x), to_f64(w), d, 1e-5, RmsNormKind::kWeight, DType::BF16), DType::BF16)
          .ok);
  auto one_rounding = rms_ref(to_f64(x), to_f64(w), d, 1e-5, RmsNormKind::kWeight, DType::BF16, true);
  EXPECT_FALSE(compare(got, one_rounding, DType::BF16).ok);
}

TEST(OpRmsNorm, InPlaceOverPerHeadView) {
  auto be = make_cpu_backend();
  Buffer x = randn(DType::BF16, {3, 4, 16}, 9), w = randn(DType::BF16, {16}, 10);
  auto dx = upload_new(*be, x), dw = upload_new(*be, w);
  auto ref = rms_ref(to_f64(x), to_f64(w), 16, 1e-6, RmsNormKind::kWeight, DType::BF16);
  Tensor view = dx.tensor().reshaped({12, 16});
  be->rms_norm(view, dw, 1e-6f, RmsNormKind::kWeight, view);
  EXPECT_MATCHES_REF(host_f32(*be, dx), ref, DType::BF16);
}

TEST(OpLayerNorm, MatchesF64Reference) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t d : {1, 9, 96}) {
      const int64_t n = 4;
      Buffer x = randn(act, {n, d}, 21 + d, 2.0f), w = randn(act, {d}, 22), b = randn(act, {d}, 23);
      auto dx = upload_new(*be, x), dw = upload_new(*be, w), db = upload_new(*be, b);
      auto out = be->alloc(act, {n, d});
      be->layer_norm(dx, dw, db, 1e-6f, out);
      auto xv = to_f64(x), wv = to_f64(w), bv = to_f64(b);
      std::vector<double> ref(xv.size());
      for (int64_t r = 0; r < n; ++r) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < d; ++i) m += xv[r * d + i];
        m /= d;
        for (int64_t i = 0; i < d; ++i) v += (xv[r * d + i] - m) * (xv[r * d + i] - m);
        v /= d;
        for (int64_t i = 0; i < d; ++i)
          ref[r * d + i] = rnd64((xv[r * d + i] - m) / std::sqrt(v + 1e-6) * wv[i] + bv[i], act);
      }
      SCOPED_TRACE("d=" + std::to_string(d));
      // d == 1: the centred value is exactly 0, the output is the bias.
      EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
    }
}

}  // namespace
