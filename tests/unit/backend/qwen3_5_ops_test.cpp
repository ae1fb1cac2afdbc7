// Qwen3.5 ops (causal_conv1d_silu, gdn_gates, gated_delta_rule_{chunked,recurrent}, rms_norm_gated,
// sigmoid_mul, rope_f32, embedding_bag) against float64 references with explicit rounding points,
// chunking/decode invariance, and planted controls.
#include <random>

#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

Buffer uniform(DType dt, Shape s, uint32_t seed, float lo, float hi) {
  Buffer b(dt, std::move(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i) store_f32(b.view(), i, u(rng));
  return b;
}

double silu64(double x) { return x / (1.0 + std::exp(-x)); }

std::vector<double> conv_ref(const std::vector<double>& x, const std::vector<double>& w,
                             std::vector<double>& st, int64_t n, int64_t C, int64_t K, DType act) {
  std::vector<double> out(static_cast<size_t>(n * C));
  for (int64_t c = 0; c < C; ++c) {
    std::vector<double> xx(st.begin() + c * (K - 1), st.begin() + (c + 1) * (K - 1));
    for (int64_t t = 0; t < n; ++t) xx.push_back(x[t * C + c]);
    for (int64_t t = 0; t < n; ++t) {
      double s = 0;
      for (int64_t j = 0; j < K; ++j) s += w[c * K + j] * xx[t + j];
      out[t * C + c] = rnd64(silu64(rnd64(s, act)), act);
    }
    for (int64_t j = 0; j < K - 1; ++j) st[c * (K - 1) + j] = xx[n + j];
  }
  return out;
}

TEST(OpCausalConv1d, MatchesF64ReferenceAndCarriesState) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t n : {1, 5, 70}) {
      const int64_t C = 37, K = 4;
      Buffer x = randn(act, {n, C}, 3 + n), w = randn(act, {C, K}, 4 + n, 0.5f),
             s0 = randn(act, {C, K - 1}, 5 + n);
      auto dx = upload_new(*be, x), dw = upload_new(*be, w), ds = upload_new(*be, s0);
      auto out = be->alloc(act, {n, C});
      be->causal_conv1d_silu(dx, dw, ds, out);
      std::vector<double> st = to_f64(s0);
      auto ref = conv_ref(to_f64(x), to_f64(w), st, n, C, K, act);
      SCOPED_TRACE("n=" + std::to_string(n));
      EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
      std::vector<float> sf = host_f32(*be, ds);
      for (size_t i = 0; i < st.size(); ++i)
        EXPECT_EQ(sf[i], static_cast<float>(st[i])) << i;  // exact copies

      // n one-token calls from the same start state give the same bits as the one call.
      auto ds2 = upload_new(*be, s0);
      auto out2 = be->alloc(act, {n, C});
      for (int64_t t = 0; t < n; ++t)
        be->causal_conv1d_silu(dx.tensor().slice_rows(t, t + 1), dw, ds2, out2.tensor().slice_rows(t, t + 1));
      EXPECT_TRUE(bits_equal(*be, out, out2));
      EXPECT_TRUE(bits_equal(*be, ds, ds2));
    }
}

TEST(OpGdnGates, MatchesF64Reference) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32}) {
    const int64_t n = 9, h = 6;
    Buffer a = randn(act, {n, h}, 1, 8.0f), b = randn(act, {n, h}, 2, 3.0f);
    Buffer A_log = randn(act, {h}, 3), dt = randn(act, {h}, 4, 10.0f);  // dt large: softplus threshold path
    auto da = upload_new(*be, a), db = upload_new(*be, b), dA = upload_new(*be, A_log),
         ddt = upload_new(*be, dt);
    auto g = be->alloc(DType::F32, {n, h}), beta = be->alloc(act, {n, h});
    be->gdn_gates(da, db, dA, ddt, g, beta);
    auto av = to_f64(a), bv = to_f64(b), Av = to_f64(A_log), dv = to_f64(dt);
    std::vector<double> gref(static_cast<size_t>(n * h)), bref(gref.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < h; ++j) {
        const double x = av[i * h + j] + dv[j];
        gref[i * h + j] = -std::exp(Av[j]) * (x > 20 ? x : std::log1p(std::exp(x)));
        bref[i * h + j] = rnd64(1.0 / (1.0 + std::exp(-bv[i * h + j])), act);
      }
    auto r = compare(host_f32(*be, g), gref, DType::F32, 1e-6);
    EXPECT_TRUE(r.ok) << r.detail;
    EXPECT_MATCHES_REF(host_f32(*be, beta), bref, act);
  }
}

struct DeltaCase {
  int64_t n, hk, hv, dk, dv;
  DType act;
};

// The literal recurrence in float64. head_of(h) picks the key head of value head h.
void delta_ref(const DeltaCase& c, const std::vector<double>& q, const std::vector<double>& k,
               const std::vector<double>& v, const std::vector<double>& g, const std::vector<double>& beta,
               std::vector<double>& S, std::vector<double>& out, bool tiled_heads = false) {
  const int64_t r = c.hv / c.hk;
  out.assign(static_cast<size_t>(c.n * c.hv * c.dv), 0.0);
  for (int64_t h = 0; h < c.hv; ++h) {
    const int64_t kh = tiled_heads ? h % c.hk : h / r;
    double* s = S.data() + h * c.dk * c.dv;
    for (int64_t t = 0; t < c.n; ++t) {
      std::vector<double> qt(q.begin() + (t * c.hk + kh) * c.dk, q.begin() + (t * c.hk + kh + 1) * c.dk);
      std::vector<double> kt(k.begin() + (t * c.hk + kh) * c.dk, k.begin() + (t * c.hk + kh + 1) * c.dk);
      double nq = 1e-6, nk = 1e-6;
      for (int64_t i = 0; i < c.dk; ++i) nq += qt[i] * qt[i], nk += kt[i] * kt[i];
      for (int64_t i = 0; i < c.dk; ++i)
        qt[i] /= std::sqrt(nq) * std::sqrt(double(c.dk)), kt[i] /= std::sqrt(nk);
      const double decay = std::exp(g[t * c.hv + h]), b = beta[t * c.hv + h];
      for (int64_t i = 0; i < c.dk * c.dv; ++i) s[i] *= decay;
      for (int64_t col = 0; col < c.dv; ++col) {
        double mem = 0;
        for (int64_t i = 0; i < c.dk; ++i) mem += s[i * c.dv + col] * kt[i];
        const double delta = (v[(t * c.hv + h) * c.dv + col] - mem) * b;
        for (int64_t i = 0; i < c.dk; ++i) s[i * c.dv + col] += kt[i] * delta;
        double o = 0;
        for (int64_t i = 0; i < c.dk; ++i) o += s[i * c.dv + col] * qt[i];
        out[(t * c.hv + h) * c.dv + col] = rnd64(o, c.act);
      }
    }
  }
}

struct DeltaInputs {
  Buffer q, k, v, g, beta, s0;
  DeltaInputs(const DeltaCase& c, uint32_t seed)
      : q(randn(c.act, {c.n, c.hk, c.dk}, seed)),
        k(randn(c.act, {c.n, c.hk, c.dk}, seed + 1)),
        v(randn(c.act, {c.n, c.hv, c.dv}, seed + 2)),
        g(uniform(DType::F32, {c.n, c.hv}, seed + 3, -0.6f, 0.0f)),
        beta(uniform(c.act, {c.n, c.hv}, seed + 4, 0.0f, 1.0f)),
        s0(randn(DType::F32, {c.hv, c.dk, c.dv}, seed + 5, 0.3f)) {}
};

TEST(OpGatedDeltaRule, BothFormsMatchF64Recurrence) {
  auto be = make_cpu_backend();
  const DeltaCase cases[] = {{1, 2, 4, 16, 16, DType::BF16},
                             {70, 2, 4, 16, 8, DType::BF16},
                             {130, 3, 3, 32, 24, DType::F32},
                             {64, 1, 2, 8, 8, DType::F32},
                             {5, 2, 2, 128, 16, DType::F32}};
  uint32_t seed = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " hk=" + std::to_string(c.hk) + " hv=" + std::to_string(c.hv));
    DeltaInputs in(c, seed += 10);
    std::vector<double> S = to_f64(in.s0), ref, St = to_f64(in.s0), tiled;
    delta_ref(c, to_f64(in.q), to_f64(in.k), to_f64(in.v), to_f64(in.g), to_f64(in.beta), S, ref);
    delta_ref(c, to_f64(in.q), to_f64(in.k), to_f64(in.v), to_f64(in.g), to_f64(in.beta), St, tiled, true);
    for (bool chunked : {true, false}) {
      auto dq = upload_new(*be, in.q), dk = upload_new(*be, in.k), dv = upload_new(*be, in.v);
      auto dg = upload_new(*be, in.g), db = upload_new(*be, in.beta), ds = upload_new(*be, in.s0);
      auto out = be->alloc(c.act, {c.n, c.hv, c.dv});
      if (chunked)
        be->gated_delta_rule_chunked(dq, dk, dv, dg, db, ds, out);
      else
        be->gated_delta_rule_recurrent(dq, dk, dv, dg, db, ds, out);
      SCOPED_TRACE(chunked ? "chunked" : "recurrent");
      const auto got = host_f32(*be, out);
      auto r = compare(got, ref, c.act, 3e-5);
      EXPECT_TRUE(r.ok) << r.detail;
      auto rs = compare(host_f32(*be, ds), S, DType::F32, 3e-5);
      EXPECT_TRUE(rs.ok) << "state: " << rs.detail;
      EXPECT_FALSE(compare(perturb(got, c.act), ref, c.act, 3e-5).ok) << "planted perturbation not caught";
      // Planted semantic control: key heads tiled over value heads instead of repeat_interleave.
      if (c.hv / c.hk > 1 && c.hk > 1) {
        EXPECT_FALSE(compare(got, tiled, c.act, 3e-5).ok) << "tiled heads not caught";
      }
    }
  }
}

// A call over [0, n) equals a call over [0, 64) then [64, n) with the state carried, bit for bit
// (the prompt-cache resume property), and thread count does not change anything.
TEST(OpGatedDeltaRule, ChunkAlignedSplitIsBitExact) {
  ThreadPool pool1(1), pool3(3);
  auto be1 = make_cpu_backend(&pool1), be3 = make_cpu_backend(&pool3);
  const DeltaCase c{150, 2, 4, 16, 16, DType::BF16};
  DeltaInputs in(c, 7);
  auto run = [&](Backend& be, std::vector<int64_t> cuts, DeviceBuffer& out, DeviceBuffer& st) {
    auto dq = upload_new(be, in.q), dk = upload_new(be, in.k), dv = upload_new(be, in.v);
    auto dg = upload_new(be, in.g), db = upload_new(be, in.beta);
    st = upload_new(be, in.s0);
    out = be.alloc(c.act, {c.n, c.hv, c.dv});
    int64_t a = 0;
    cuts.push_back(c.n);
    for (int64_t b : cuts) {
      be.gated_delta_rule_chunked(dq.tensor().slice_rows(a, b), dk.tensor().slice_rows(a, b),
                                  dv.tensor().slice_rows(a, b), dg.tensor().slice_rows(a, b),
                                  db.tensor().slice_rows(a, b), st, out.tensor().slice_rows(a, b));
      a = b;
    }
  };
  DeviceBuffer o1, s1, o2, s2, o3, s3, o4, s4;
  run(*be1, {}, o1, s1);
  run(*be1, {64}, o2, s2);
  run(*be3, {64, 128}, o3, s3);
  run(*be1, {70}, o4, s4);  // not chunk-aligned: same math, different f32 grouping
  EXPECT_TRUE(bits_equal(*be1, o1, o2));
  EXPECT_TRUE(bits_equal(*be1, s1, s2));
  EXPECT_TRUE(bits_equal(*be1, o1, o3));
  EXPECT_TRUE(bits_equal(*be1, s1, s3));
  EXPECT_FALSE(bits_equal(*be1, s1, s4)) << "control: an unaligned split should change some state bits";
}

TEST(OpRmsNormGated, MatchesF64ReferenceWithRoundings) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t d : {16, 128}) {
      const int64_t n = 7;
      Buffer x = randn(act, {n, d}, 21 + d, 2.0f), z = randn(act, {n, d}, 22 + d, 2.0f),
             w = randn(act, {d}, 23);
      auto dx = upload_new(*be, x), dz = upload_new(*be, z), dw = upload_new(*be, w);
      auto out = be->alloc(act, {n, d});
      be->rms_norm_gated(dx, dz, dw, 1e-6f, out);
      auto xv = to_f64(x), zv = to_f64(z), wv = to_f64(w);
      std::vector<double> ref(xv.size());
      for (int64_t r = 0; r < n; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < d; ++i) ss += xv[r * d + i] * xv[r * d + i];
        const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
        for (int64_t i = 0; i < d; ++i)
          ref[r * d + i] =
              rnd64(rnd64(wv[i] * rnd64(xv[r * d + i] * inv, act), act) * silu64(zv[r * d + i]), act);
      }
      SCOPED_TRACE("d=" + std::to_string(d));
      EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
    }
}

TEST(OpSigmoidMul, MatchesF64Reference) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32}) {
    Buffer x = randn(act, {5, 300}, 31, 3.0f), z = randn(act, {5, 300}, 32, 3.0f);
    auto dx = upload_new(*be, x), dz = upload_new(*be, z);
    auto out = be->alloc(act, {5, 300});
    be->sigmoid_mul(dx, dz, out);
    auto xv = to_f64(x), zv = to_f64(z);
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ref[i] = rnd64(xv[i] * rnd64(1.0 / (1.0 + std::exp(-zv[i])), act), act);
    EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
  }
}

TEST(OpRopeF32, MatchesF64ReferenceWithOneRounding) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32}) {
    const int64_t n = 6, heads = 3, d = 16;
    Buffer x = randn(act, {n, heads, d}, 41, 2.0f), ang = uniform(DType::F32, {n, d}, 42, -20.0f, 20.0f);
    Buffer cs(DType::F32, {n, d}), sn(DType::F32, {n, d});
    for (int64_t i = 0; i < n * d; ++i) {
      cs.as<float>()[i] = std::cos(ang.as<float>()[i]);
      sn.as<float>()[i] = std::sin(ang.as<float>()[i]);
    }
    auto dx = upload_new(*be, x), dc = upload_new(*be, cs), dsn = upload_new(*be, sn);
    auto out = be->alloc(act, {n, heads, d});
    be->rope_f32(dx, dc, dsn, out);
    auto xv = to_f64(x), cv = to_f64(cs), sv = to_f64(sn);
    std::vector<double> ref(xv.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < d; ++j) {
          const int64_t o = (i * heads + h) * d;
          const double rot = j < d / 2 ? -xv[o + j + d / 2] : xv[o + j - d / 2];
          ref[o + j] = rnd64(xv[o + j] * cv[i * d + j] + rot * sv[i * d + j], act);
        }
    EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
  }
}

TEST(OpEmbeddingBag, MatchesF64Reference) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32}) {
    const int64_t V = 50, d = 24, n = 11, taps = 4;
    Buffer table = randn(act, {V, d}, 51), w = uniform(DType::F32, {n, taps}, 52, 0.0f, 1.0f);
    Buffer idx(DType::I32, {n, taps});
    for (int64_t i = 0; i < n * taps; ++i) idx.as<int32_t>()[i] = static_cast<int32_t>((i * 7) % V);
    auto dt = upload_new(*be, table), di = upload_new(*be, idx), dw = upload_new(*be, w);
    auto out = be->alloc(act, {n, d});
    be->embedding_bag(dt, di, dw, out);
    auto tv = to_f64(table), wv = to_f64(w);
    std::vector<double> ref(static_cast<size_t>(n * d), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c) {
        double s = 0;
        for (int64_t t = 0; t < taps; ++t)
          s += tv[idx.as<int32_t>()[i * taps + t] * d + c] * wv[i * taps + t];
        ref[i * d + c] = rnd64(s, act);
      }
    EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
  }
}

}  // namespace
