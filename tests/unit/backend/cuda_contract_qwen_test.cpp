// The CUDA backend against the CPU reference for the Qwen3.5 ops (causal_conv1d_silu, gdn_gates,
// gated_delta_rule_{chunked,recurrent}, rms_norm_gated, rope_f32, embedding_bag; sigmoid_mul is with
// the elementwise ops in cuda_contract_test.cpp). Recurrent state outputs are compared like the
// outputs. Same fixture and comparators as cuda_contract_test.cpp; skips without CUDA.
#include <cmath>
#include <utility>

#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};
constexpr DType kF32 = DType::F32;

// ---- causal_conv1d_silu ----------------------------------------------------------------------
// Two calls (n1 then n2 tokens) with the window carried on each backend; outputs and the window
// after each call compared, bit for bit (the CPU's arithmetic: separate f32 products and sums in
// increasing j, both roundings; the window is a copy of raw inputs).
TEST_F(CudaContract, CausalConv1dSilu) {
  struct Case {
    int64_t C, K, n1, n2;
    bool zero_state;
  };
  // n <= 4 (or < K - 1) runs the one-launch kernel, more tokens the token-parallel one (causal_conv1d.cu).
  const Case cases[] = {{37, 4, 1, 1, true},    {37, 4, 7, 1, false},     {67, 2, 70, 3, false},
                        {8192, 4, 17, 1, true}, {6144, 4, 300, 5, false}, {29, 8, 2, 9, false},
                        {64, 4, 5, 4, false},   {29, 8, 6, 40, true}};
  uint32_t seed = 2000;
  for (const Case& c : cases)
    for (DType act : kActs) {
      Buffer x1 = randn(act, {c.n1, c.C}, seed++, 2.0f), x2 = randn(act, {c.n2, c.C}, seed++, 2.0f);
      Buffer w = randn(act, {c.C, c.K}, seed++, 0.7f);
      Buffer s0 = c.zero_state ? Buffer(act, {c.C, c.K - 1}) : randn(act, {c.C, c.K - 1}, seed++, 2.0f);
      auto run = [&](Backend& be) {
        auto dx1 = upload_new(be, x1), dx2 = upload_new(be, x2), dw = upload_new(be, w),
             ds = upload_new(be, s0);
        auto o1 = be.alloc(act, x1.shape()), o2 = be.alloc(act, x2.shape());
        be.causal_conv1d_silu(dx1, dw, ds, o1);
        std::vector<Buffer> r;
        r.push_back(fetch(be, o1));
        r.push_back(fetch(be, ds));
        be.causal_conv1d_silu(dx2, dw, ds, o2);
        r.push_back(fetch(be, o2));
        r.push_back(fetch(be, ds));
        return r;
      };
      const auto ref = run(cpu()), got = run(dev());
      const std::string what =
          cat("causal_conv1d_silu C ", c.C, " K ", c.K, " n ", c.n1, "+", c.n2, " ", dtype_name(act));
      EXPECT_TRUE(Close(ref[0], got[0], what + " out 1"));
      EXPECT_TRUE(Exact(ref[1], got[1])) << what << " state after call 1 (raw inputs: exact)";
      EXPECT_TRUE(Close(ref[2], got[2], what + " out 2"));
      EXPECT_TRUE(Exact(ref[3], got[3])) << what << " state after call 2";
    }
}

// ---- gdn_gates -------------------------------------------------------------------------------
TEST_F(CudaContract, GdnGates) {
  struct Case {
    int64_t n, h;
  };
  uint32_t seed = 2100;
  for (const Case c : {Case{1, 32}, Case{7, 6}, Case{257, 48}})
    for (DType act : kActs)
      for (DType pdt : kActs) {  // A_log / dt_bias dtype
        Buffer a = randn(act, {c.n, c.h}, seed++, 8.0f), b = randn(act, {c.n, c.h}, seed++, 3.0f);
        Buffer A_log = randn(pdt, {c.h}, seed++), dt = randn(pdt, {c.h}, seed++, 10.0f);
        // softplus threshold: a + dt_bias exactly 20 (log1p branch) and just above (identity).
        store_f32(dt.view(), 0, 0.0f);
        store_f32(a.view(), 0, 20.0f);
        if (c.n > 1) store_f32(a.view(), c.h, 20.125f);
        auto run = [&](Backend& be) {
          auto da = upload_new(be, a), db = upload_new(be, b), dA = upload_new(be, A_log),
               ddt = upload_new(be, dt);
          auto g = be.alloc(kF32, {c.n, c.h}), beta = be.alloc(act, {c.n, c.h});
          be.gdn_gates(da, db, dA, ddt, g, beta);
          return std::pair{fetch(be, g), fetch(be, beta)};
        };
        auto [rg, rb] = run(cpu());
        auto [gg, gb] = run(dev());
        const std::string what =
            cat("gdn_gates [", c.n, ", ", c.h, "] ", dtype_name(act), " params ", dtype_name(pdt));
        EXPECT_TRUE(Close(rg, gg, what + " g"));
        EXPECT_TRUE(Close(rb, gb, what + " beta"));
      }
}

// ---- gated delta rule ------------------------------------------------------------------------
struct DeltaCase {
  int64_t n, hk, hv, dk, dv;
};

// Log decays g[n, hv] < 0 from fast (head 0 of 4: down to -1.5 per token) to slow (head 3: > -0.005).
Buffer decays(int64_t n, int64_t hv, uint32_t seed) {
  Buffer g = uniform(kF32, {n, hv}, seed, -1.0f, -0.001f);
  const float scale[4] = {1.5f, 0.3f, 0.05f, 0.005f};
  for (int64_t i = 0; i < n * hv; ++i) g.as<float>()[i] *= scale[(i % hv) % 4];
  return g;
}

struct DeltaInputs {
  Buffer q, k, v, g, beta, s0;
  DeltaInputs(const DeltaCase& c, DType act, uint32_t seed, bool zero_state)
      : q(randn(act, {c.n, c.hk, c.dk}, seed)),
        k(randn(act, {c.n, c.hk, c.dk}, seed + 1)),
        v(randn(act, {c.n, c.hv, c.dv}, seed + 2)),
        g(decays(c.n, c.hv, seed + 3)),
        beta(uniform(act, {c.n, c.hv}, seed + 4, 0.0f, 1.0f)),
        s0(zero_state ? Buffer(kF32, {c.hv, c.dk, c.dv}) : randn(kF32, {c.hv, c.dk, c.dv}, seed + 5, 0.3f)) {}
};

// One call over rows [a, b) per consecutive pair of `cuts` (0 and n included), the state carried;
// returns {out, final state}.
std::vector<Buffer> run_delta(Backend& be, const DeltaInputs& in, bool chunked, std::vector<int64_t> cuts) {
  auto dq = upload_new(be, in.q), dk = upload_new(be, in.k), dv = upload_new(be, in.v);
  auto dg = upload_new(be, in.g), db = upload_new(be, in.beta), ds = upload_new(be, in.s0);
  auto out = be.alloc(in.q.dtype(), in.v.shape());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t a = cuts[i], b = cuts[i + 1];
    auto sl = [&](const DeviceBuffer& t) { return t.tensor().slice_rows(a, b); };
    if (chunked)
      be.gated_delta_rule_chunked(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), ds, sl(out));
    else
      be.gated_delta_rule_recurrent(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), ds, sl(out));
  }
  std::vector<Buffer> r;
  r.push_back(fetch(be, out));
  r.push_back(fetch(be, ds));
  return r;
}

std::string delta_str(const DeltaCase& c, DType act) {
  return cat("n ", c.n, " hk ", c.hk, " hv ", c.hv, " dk ", c.dk, " dv ", c.dv, " ", dtype_name(act));
}

TEST_F(CudaContract, GatedDeltaRuleChunked) {
  const DeltaCase cases[] = {{1, 2, 4, 128, 128},    {63, 2, 4, 128, 128}, {64, 2, 4, 128, 128},
                             {130, 2, 4, 128, 128},  {63, 1, 2, 33, 17},   {130, 1, 2, 33, 17},
                             {130, 16, 32, 128, 128}};
  uint32_t seed = 2200;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        if (c.hk == 16 && !zero_state) continue;  // the realistic shape once per dtype
        DeltaInputs in(c, act, seed += 10, zero_state);
        const auto ref = run_delta(cpu(), in, true, {0, c.n}), got = run_delta(dev(), in, true, {0, c.n});
        const std::string what = cat("gdr chunked ", delta_str(c, act), zero_state ? " fresh" : " carried");
        EXPECT_TRUE(Close(ref[0], got[0], what + " out"));
        EXPECT_TRUE(Close(ref[1], got[1], what + " state"));
      }
}

// ops.h: a call over [0, 64m + r) equals calls over [0, 64m) and [64m, 64m + r) with the state
// carried, bit for bit; checked on the CUDA backend alone, and the split against the CPU's split.
TEST_F(CudaContract, GatedDeltaRuleChunkedSplit) {
  const DeltaCase c{150, 2, 4, 128, 64};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    DeltaInputs in(c, act, 2300, false);
    const auto one = run_delta(dev(), in, true, {0, c.n});
    const auto split = run_delta(dev(), in, true, {0, 64, 128, c.n});
    EXPECT_TRUE(Exact(one[0], split[0])) << "out: one call vs 64 + 64 + 22";
    EXPECT_TRUE(Exact(one[1], split[1])) << "state: one call vs 64 + 64 + 22";
    const auto cpu_split = run_delta(cpu(), in, true, {0, 64, 128, c.n});
    EXPECT_TRUE(Close(cpu_split[0], split[0], "gdr chunked split out " + delta_str(c, act)));
    EXPECT_TRUE(Close(cpu_split[1], split[1], "gdr chunked split state " + delta_str(c, act)));
  }
}

TEST_F(CudaContract, GatedDeltaRuleChunkedPlantedControl) {
  const DeltaCase c{130, 2, 4, 128, 128};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    DeltaInputs in(c, act, 2400, false);
    const auto got = run_delta(dev(), in, true, {0, c.n});
    const auto ref = run_delta(cpu(), in, true, {0, c.n});
    EXPECT_TRUE(Close(ref[0], got[0], "gdr control baseline out"));
    EXPECT_TRUE(Close(ref[1], got[1], "gdr control baseline state"));
    // One ulp on an element of k[129][1] (the last token; earlier ones decay away): the comparator must
    // see it in the output and in the state.
    DeltaInputs pert(c, act, 2400, false);
    auto run_k = [&](const Buffer& k) {
      pert.k = clone(k);
      return std::move(run_delta(cpu(), pert, true, {0, c.n})[0]);
    };
    const int64_t k0 = (129 * c.hk + 1) * c.dk;
    pert.k = visible_bump(in.k, k0, k0 + c.dk, run_k);
    const auto p = run_delta(cpu(), pert, true, {0, c.n});
    EXPECT_TRUE(Differs(p[0], got[0])) << "out, k + 1 ulp";
    EXPECT_TRUE(Differs(p[1], got[1])) << "state, k + 1 ulp";
    // A larger change (beta[129][1] -> 0) must also fail the tolerant check.
    pert.k = clone(in.k);
    pert.beta = poke(in.beta, 129 * c.hv + 1, -load_f32(in.beta.view(), 129 * c.hv + 1));
    const auto p2 = run_delta(cpu(), pert, true, {0, c.n});
    EXPECT_FALSE(Close(p2[0], got[0], "gdr control beta -> 0 out (must fail)"));
    EXPECT_FALSE(Close(p2[1], got[1], "gdr control beta -> 0 state (must fail)"));
  }
}

// One-token decode (and a few tokens) on a carried state, then one more token.
TEST_F(CudaContract, GatedDeltaRuleRecurrent) {
  const DeltaCase cases[] = {
      {1, 2, 4, 128, 128}, {3, 2, 4, 128, 128}, {2, 1, 2, 33, 17}, {1, 16, 32, 128, 128}};
  uint32_t seed = 2500;
  for (const DeltaCase& c : cases)
    for (DType act : kActs) {
      DeltaCase c2 = c;
      c2.n = c.n + 1;
      DeltaInputs in(c2, act, seed += 10, false);
      const std::vector<int64_t> cuts = {0, c.n, c.n + 1};
      const auto ref = run_delta(cpu(), in, false, cuts), got = run_delta(dev(), in, false, cuts);
      const std::string what = cat("gdr recurrent ", delta_str(c, act), " + 1");
      EXPECT_TRUE(Close(ref[0], got[0], what + " out"));
      EXPECT_TRUE(Close(ref[1], got[1], what + " state"));
    }
}

// ---- causal_conv1d_silu, split ---------------------------------------------------------------
// Within CUDA, exact: one call over n tokens against splits that mix the few-token kernel (<= 4 tokens,
// one launch) and the many-token one (a thread per token and channel, then the window moved), the
// window carried between calls; outputs and the final window bit for bit.
TEST_F(CudaContract, CausalConv1dSiluSplitInvariance) {
  struct Case {
    int64_t C, K, n;
  };
  uint32_t seed = 2050;
  for (const Case c : {Case{6144, 4, 150}, Case{67, 2, 40}, Case{29, 8, 33}})
    for (DType act : kActs) {
      SCOPED_TRACE(cat("C ", c.C, " K ", c.K, " ", dtype_name(act)));
      Buffer x = randn(act, {c.n, c.C}, seed++, 2.0f), w = randn(act, {c.C, c.K}, seed++, 0.7f);
      Buffer s0 = randn(act, {c.C, c.K - 1}, seed++, 2.0f);
      auto run = [&](const std::vector<int64_t>& ends) {
        auto dx = upload_new(dev(), x), dw = upload_new(dev(), w), ds = upload_new(dev(), s0);
        auto out = dev().alloc(act, x.shape());
        int64_t a = 0;
        for (int64_t e : ends) {
          dev().causal_conv1d_silu(dx.tensor().slice_rows(a, e), dw, ds, out.tensor().slice_rows(a, e));
          a = e;
        }
        return std::pair{fetch(dev(), out), fetch(dev(), ds)};
      };
      const auto [o1, s1] = run({c.n});
      const std::vector<std::vector<int64_t>> splits = {
          {1, c.n}, {2, 3, 9, 10, c.n}, {5, 6, 7, 8, c.n - 1, c.n}, {4, 20, c.n}};
      for (const std::vector<int64_t>& ends : splits) {
        const auto [o2, s2] = run(ends);
        EXPECT_TRUE(Exact(o1, o2)) << "out, " << ends.size() << " calls";
        EXPECT_TRUE(Exact(s1, s2)) << "window, " << ends.size() << " calls";
      }
    }
}

// ---- rms_norm_gated --------------------------------------------------------------------------
TEST_F(CudaContract, RmsNormGated) {
  struct Case {
    int64_t n, d;
  };
  uint32_t seed = 2600;
  for (const Case c : {Case{1, 128}, Case{33 * 32, 128}, Case{7, 67}, Case{257, 33}})
    for (DType act : kActs) {
      Buffer x = randn(act, {c.n, c.d}, seed++, 2.0f), z = randn(act, {c.n, c.d}, seed++, 3.0f),
             w = uniform(act, {c.d}, seed++, 0.5f, 1.5f);
      auto run = [&](Backend& be) {
        auto dx = upload_new(be, x), dz = upload_new(be, z), dw = upload_new(be, w);
        auto out = be.alloc(act, x.shape());
        be.rms_norm_gated(dx, dz, dw, 1e-6f, out);
        return fetch(be, out);
      };
      EXPECT_TRUE(
          Close(run(cpu()), run(dev()), cat("rms_norm_gated [", c.n, ", ", c.d, "] ", dtype_name(act))));
    }
}

// ---- vision: rope_f32, embedding_bag ---------------------------------------------------------
TEST_F(CudaContract, RopeF32) {
  struct Case {
    int64_t n, heads, d;
  };
  uint32_t seed = 2700;
  for (const Case c : {Case{1, 16, 72}, Case{7, 3, 80}, Case{333, 2, 34}, Case{5, 1, 2}})
    for (DType act : kActs) {
      Buffer x = randn(act, {c.n, c.heads, c.d}, seed++, 2.0f);
      Buffer ang = uniform(kF32, {c.n, c.d}, seed++, -40.0f, 40.0f), cs(kF32, {c.n, c.d}),
             sn(kF32, {c.n, c.d});
      for (int64_t i = 0; i < c.n * c.d; ++i) {
        cs.as<float>()[i] = std::cos(ang.as<float>()[i]);
        sn.as<float>()[i] = std::sin(ang.as<float>()[i]);
      }
      auto run = [&](Backend& be, bool in_place) {
        auto dx = upload_new(be, x), dc = upload_new(be, cs), ds = upload_new(be, sn);
        auto out = be.alloc(act, x.shape());
        const Tensor& o = in_place ? dx.tensor() : out.tensor();
        be.rope_f32(dx, dc, ds, o);
        return fetch(be, o);
      };
      const Buffer ref = run(cpu(), false);
      for (bool in_place : {false, true})
        EXPECT_TRUE(Exact(ref, run(dev(), in_place))) << cat(
            "rope_f32 [", c.n, ", ", c.heads, ", ", c.d, "] ", dtype_name(act), in_place ? " in place" : "");
    }
}

TEST_F(CudaContract, EmbeddingBag) {
  struct Case {
    int64_t V, d, n, taps;
  };
  uint32_t seed = 2800;
  for (const Case c : {Case{50, 24, 11, 4}, Case{2304, 1152, 257, 4}, Case{9, 7, 1, 1}, Case{100, 33, 7, 3}})
    for (DType tab : kActs)
      for (DType act : kActs) {
        Buffer table = randn(tab, {c.V, c.d}, seed++), w = uniform(kF32, {c.n, c.taps}, seed++, 0.0f, 1.0f);
        Buffer idx = i32({c.n, c.taps}, rand_ints(c.n * c.taps, 0, static_cast<int32_t>(c.V - 1), seed++));
        auto run = [&](Backend& be) {
          auto dt = upload_new(be, table), di = upload_new(be, idx), dw = upload_new(be, w);
          auto out = be.alloc(act, {c.n, c.d});
          be.embedding_bag(dt, di, dw, out);
          return fetch(be, out);
        };
        EXPECT_TRUE(Exact(run(cpu()), run(dev())))
            << cat("embedding_bag [", c.V, ", ", c.d, "] n ", c.n, " taps ", c.taps, " table ",
                   dtype_name(tab), " -> ", dtype_name(act));
      }
}

}  // namespace
