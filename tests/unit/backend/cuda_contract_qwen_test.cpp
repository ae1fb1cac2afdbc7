// The CUDA backend against the CPU reference for the Qwen3.5 ops (causal_conv1d_silu, gdn_gates,
// gated_delta_rule_{chunked,recurrent}, rms_norm_gated, rope_f32, embedding_bag; sigmoid_mul is with
// the elementwise ops in cuda_contract_test.cpp). Recurrent state outputs are compared like the
// outputs. The delta rule is held to the CPU by a stated tolerance with planted controls, and is
// exactly invariant within CUDA (any split into calls, either entry point); the others are
// bit-identical to the CPU. Same fixture and comparators as cuda_contract_test.cpp; skips without CUDA.
#include <algorithm>
#include <cmath>
#include <utility>

#include "backend/test_hooks.h"
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
// Three kernel sets (test_hooks::set_cuda_delta_rule_variant): the default runs the chunked form on tensor
// cores (GatedDeltaRuleChunkedTc*: the tolerance below, exactly invariant under 64-aligned cuts) and the
// CPU's recurrent arithmetic bit for bit (GatedDeltaRuleRecurrent); variant 2 the CPU's chunked arithmetic
// bit for bit (GatedDeltaRuleChunked*, also the default for head dims the tensor-core form does not take);
// the optional per-token one (GatedDeltaRuleSeq*) is held to the CPU by the tolerance below and is exactly
// split-invariant.
struct SeqVariant {  // the per-token kernel for one test's scope
  SeqVariant() { EXPECT_TRUE(test_hooks::set_cuda_delta_rule_variant(1)); }
  ~SeqVariant() { test_hooks::set_cuda_delta_rule_variant(0); }
};
// CUDA runs both entry points as one per-token recurrence (gated_delta_rule.cu: S = e^g S;
// delta = (v - Sᵀk) β; S += k ⊗ delta; o = Sᵀq, with fmaf, its own summation order and Sᵀq of the
// updated state expanded as e^g (Sᵀq) + delta (k·q)), while the CPU's chunked form runs the WY
// rewrite of the same rule (cumsums, a forward substitution) and its recurrent form other sums.
// Tolerance, per element of the outputs and of the final state:
//   |cuda - cpu| <= ulp_act(max(|cpu|, |cuda|)) + 2^-15 · max|cpu|   (max over the compared tensor)
// Reason: both are f32 evaluations of one rule; each token's step rounds at the 2^-24 level of the
// magnitudes it sums (|S| entries, |o|), and the step S -> e^g (I - β k kᵀ) S (|k| = 1, 0 <= β <= 1,
// g <= 0) does not expand, so earlier differences are damped rather than amplified, over any number
// of tokens. A host emulation of the kernel's exact arithmetic (fmaf and sum order included) against
// the CPU on this file's cases: largest f32 difference 2^-19.7 · max|cpu| (2^-17.4 where a fresh state's
// first output is a cancelling k·q sum), not growing with n up to 4,000: 2^-15 leaves >= 5x. A bf16
// output may then round one bf16 step apart (the ulp term). Faults stay far outside: a skipped update
// (β -> 0 for one token and head), a state kept in bf16 between tokens, an initial-state entry + 0.01 —
// 11x to 3,000x the bound in that emulation; the planted controls below check them on the device.
// Within CUDA: exact (GatedDeltaRuleSplitInvariance).
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

// One call per piece over rows [previous end, end), chunked or recurrent, the state carried; returns
// {out, final state}. Round-state: the state rounded to bf16 after every call (a planted fault).
struct Piece {
  int64_t end;
  bool chunked;
};
std::vector<Buffer> run_delta(Backend& be, const DeltaInputs& in, const std::vector<Piece>& pieces,
                              bool round_state = false) {
  auto dq = upload_new(be, in.q), dk = upload_new(be, in.k), dv = upload_new(be, in.v);
  auto dg = upload_new(be, in.g), db = upload_new(be, in.beta), ds = upload_new(be, in.s0);
  auto out = be.alloc(in.q.dtype(), in.v.shape());
  int64_t a = 0;
  for (const Piece& p : pieces) {
    auto sl = [&](const DeviceBuffer& t) { return t.tensor().slice_rows(a, p.end); };
    if (p.chunked)
      be.gated_delta_rule_chunked(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), ds, sl(out));
    else
      be.gated_delta_rule_recurrent(sl(dq), sl(dk), sl(dv), sl(dg), sl(db), ds, sl(out));
    if (round_state) {
      Buffer s = fetch(be, ds);
      for (int64_t i = 0; i < s.numel(); ++i) s.as<float>()[i] = round_bf16(s.as<float>()[i]);
      be.upload(ds, s.data());
    }
    a = p.end;
  }
  std::vector<Buffer> r;
  r.push_back(fetch(be, out));
  r.push_back(fetch(be, ds));
  return r;
}
// One call over all n rows, or cuts at the given row counts.
std::vector<Piece> one_call(int64_t n, bool chunked) { return {{n, chunked}}; }
std::vector<Piece> cut_at(std::vector<int64_t> ends, bool chunked) {
  std::vector<Piece> p;
  for (int64_t e : ends) p.push_back({e, chunked});
  return p;
}

std::string delta_str(const DeltaCase& c, DType act) {
  return cat("n ", c.n, " hk ", c.hk, " hv ", c.hv, " dk ", c.dk, " dv ", c.dv, " ", dtype_name(act));
}

// Both entry points against the CPU's: the chunked one in one call, the recurrent one as n - 1 tokens
// then one more (decode on a carried state). Rows 1, 63, 64, 65, 130 and 4,000; the real shapes
// (0.8B: 16 value and 16 key heads, 128 / 128; 4B: 32 value heads on 16 key heads), odd GQA (9 on 3),
// every fast-path dk (32 .. 256) and dv not a multiple of 32, and the generic kernel (dk 33, dv 17).
TEST_F(CudaContract, GatedDeltaRuleSeq) {
  const SeqVariant seq;
  const DeltaCase cases[] = {{1, 2, 4, 128, 128},     {63, 2, 4, 128, 128},  {64, 2, 4, 128, 128},
                             {65, 2, 4, 128, 128},    {130, 2, 4, 128, 128}, {300, 16, 16, 128, 128},
                             {100, 16, 32, 128, 128}, {200, 3, 9, 64, 32},   {70, 1, 2, 256, 256},
                             {90, 2, 2, 32, 48},      {40, 1, 3, 96, 80},    {63, 1, 2, 33, 17},
                             {130, 1, 2, 33, 17},     {4000, 1, 4, 128, 128}};
  uint32_t seed = 2200;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        if ((c.hk == 16 || c.n == 4000) && zero_state) continue;  // the large cases once per dtype
        DeltaInputs in(c, act, seed += 10, zero_state);
        const std::string what = delta_str(c, act) + (zero_state ? " fresh" : " carried");
        for (bool chunked : {true, false}) {
          if (!chunked && c.n == 4000) continue;  // the CPU's recurrent form: slow, and 130 rows show it
          const auto pieces = chunked || c.n == 1 ? one_call(c.n, chunked) : cut_at({c.n - 1, c.n}, false);
          const auto ref = run_delta(cpu(), in, pieces), got = run_delta(dev(), in, pieces);
          const std::string w = cat("gdr ", chunked ? "chunked " : "recurrent ", what);
          EXPECT_TRUE(NearDelta(ref[0], got[0], w + " out"));
          EXPECT_TRUE(NearDelta(ref[1], got[1], w + " state"));
        }
      }
}

// Planted controls: the tolerance must reject each of these CPU results where it accepts the plain one
// (the kernels the variant in force runs: the per-token one, or the chunked form on tensor cores).
void delta_planted_controls(Backend& cpu_be, Backend& dev_be) {
  const DeltaCase c{130, 2, 4, 128, 128};
  auto cpu = [&]() -> Backend& { return cpu_be; };
  auto dev = [&]() -> Backend& { return dev_be; };
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    DeltaInputs in(c, act, 2400, false);
    const auto got = run_delta(dev(), in, one_call(c.n, true));
    const auto ref = run_delta(cpu(), in, one_call(c.n, true));
    ASSERT_TRUE(NearDelta(ref[0], got[0], "gdr control baseline out"));
    ASSERT_TRUE(NearDelta(ref[1], got[1], "gdr control baseline state"));
    // The comparator: one element moved by twice its bound (the first element from `i` on whose moved
    // value, once rounded to the dtype, still lies >= 1.5 bounds away: a bf16 value moved across a
    // power of two doubles its own ulp term).
    auto moved = [&](const Buffer& r, const Buffer& g, int64_t i) {
      double m = 0;
      for (int64_t e = 0; e < r.numel(); ++e)
        m = std::max(m, std::fabs(static_cast<double>(load_f32(r.view(), e))));
      for (;; ++i) {
        const double a = load_f32(r.view(), i), b = load_f32(g.view(), i);
        Buffer p = poke(r, i, static_cast<float>(2 * delta_bound(a, b, r.dtype(), m)));
        const double a2 = load_f32(p.view(), i);
        if (std::fabs(a2 - b) >= 1.5 * delta_bound(a2, b, r.dtype(), m)) return p;
      }
    };
    EXPECT_FALSE(NearDelta(moved(ref[0], got[0], 77 * c.hv * c.dv + 300), got[0], "control: out + 2 bound"));
    EXPECT_FALSE(
        NearDelta(moved(ref[1], got[1], 3 * c.dk * c.dv + 1000), got[1], "control: state + 2 bound"));
    // A skipped update: beta[129][1] -> 0 (the last token, so nothing decays it away).
    DeltaInputs pert(c, act, 2400, false);
    pert.beta = poke(in.beta, 129 * c.hv + 1, -load_f32(in.beta.view(), 129 * c.hv + 1));
    auto p = run_delta(cpu(), pert, one_call(c.n, true));
    EXPECT_FALSE(NearDelta(p[0], got[0], "control: beta[129][1] -> 0, out"));
    EXPECT_FALSE(NearDelta(p[1], got[1], "control: beta[129][1] -> 0, state"));
    // The state kept in bf16 between tokens (2^-9 relative per step, the kind of precision loss the
    // tolerance exists to catch).
    std::vector<int64_t> each;
    for (int64_t t = 1; t <= c.n; ++t) each.push_back(t);
    p = run_delta(cpu(), in, cut_at(each, false), /*round_state=*/true);
    EXPECT_FALSE(NearDelta(p[0], got[0], "control: bf16 state, out"));
    EXPECT_FALSE(NearDelta(p[1], got[1], "control: bf16 state, state"));
    // One initial-state entry of the slowest-decaying head + 0.01.
    pert.beta = clone(in.beta);
    pert.s0 = poke(in.s0, (3 * c.dk + 5) * c.dv + 7, 0.01f);
    p = run_delta(cpu(), pert, one_call(c.n, true));
    EXPECT_FALSE(NearDelta(p[0], got[0], "control: s0[3][5][7] + 0.01, out"));
    EXPECT_FALSE(NearDelta(p[1], got[1], "control: s0[3][5][7] + 0.01, state"));
  }
}

TEST_F(CudaContract, GatedDeltaRuleSeqPlantedControl) {
  const SeqVariant seq;
  delta_planted_controls(cpu(), dev());
}

// Invariance within CUDA, exact: one chunked call over n rows against the same rows split 1 + (n - 1),
// into 64-row calls, at odd places (7 + 13 + 1 + 29 + 63 + ...), one token per call, and through the
// recurrent entry point (one call, token by token, and mixed with chunked calls) — outputs and final
// state bit for bit. Control: one k element of the last token moved by one bf16 ulp, or 1,024 f32 ulps
// (2^-13 relative: a single f32 ulp can round away in the normalisation), must show in the state.
TEST_F(CudaContract, GatedDeltaRuleSeqSplitInvariance) {
  const SeqVariant seq;
  const DeltaCase cases[] = {{300, 16, 16, 128, 128}, {130, 16, 32, 128, 128}, {200, 3, 9, 64, 32},
                             {70, 1, 2, 256, 256},    {130, 1, 2, 33, 17},     {65, 2, 2, 32, 48}};
  uint32_t seed = 2500;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        const std::string what = delta_str(c, act) + (zero_state ? " fresh" : " carried");
        SCOPED_TRACE(what);
        DeltaInputs in(c, act, seed += 10, zero_state);
        const auto one = run_delta(dev(), in, one_call(c.n, true));
        std::vector<int64_t> by64, odd, each;
        for (int64_t e = 64; e < c.n; e += 64) by64.push_back(e);
        by64.push_back(c.n);
        const int64_t steps[] = {7, 13, 1, 29, 63, 2, 64, 5};
        for (int64_t e = 0, i = 0; e < c.n; ++i) odd.push_back(e = std::min(c.n, e + steps[i % 8]));
        for (int64_t t = 1; t <= c.n; ++t) each.push_back(t);
        std::vector<Piece> mixed = {{std::min<int64_t>(64, c.n), true}, {std::min<int64_t>(65, c.n), false}};
        for (int64_t e = 66, i = 0; e <= c.n; e += 17, ++i) mixed.push_back({e, i % 2 == 0});
        if (mixed.back().end != c.n) mixed.push_back({c.n, false});
        const std::pair<const char*, std::vector<Piece>> splits[] = {
            {"1 + (n - 1)", cut_at({1, c.n}, true)},
            {"64-row calls", cut_at(by64, true)},
            {"odd calls", cut_at(odd, true)},
            {"one token per call", cut_at(each, true)},
            {"recurrent, one call", one_call(c.n, false)},
            {"recurrent, one token per call", cut_at(each, false)},
            {"chunked and recurrent calls mixed", mixed}};
        for (const auto& [name, pieces] : splits) {
          const auto got = run_delta(dev(), in, pieces);
          EXPECT_TRUE(Exact(one[0], got[0])) << "out: one call vs " << name;
          EXPECT_TRUE(Exact(one[1], got[1])) << "state: one call vs " << name;
        }
        DeltaInputs pert(c, act, seed, zero_state);
        pert.k = bump(in.k, ((c.n - 1) * c.hk) * c.dk + 3, act == DType::BF16 ? 1 : 1024);
        EXPECT_TRUE(Differs(one[1], run_delta(dev(), pert, cut_at(odd, true))[1])) << "control: k changed";
      }
}

// ---- the chunked form on tensor cores (gated_delta_rule_chunks_tc.cu, the default where dk, dv are
// multiples of 16, dk <= 128, dv <= 256) ----------------------------------------------------------------
// Tolerance: NearDelta's (above GatedDeltaRuleSeq). Reason: the CPU's WY form with its rounding points (the
// norms, the forward substitution, the separate sums of o and of the state update are its statements), every
// matrix product on tensor cores at ~2^-21 per term (two tf32 pieces: a product's dropped lo·lo term and the
// tf32 rounding of the lo halves), summed per 8-wide k step by the instruction and across steps by f32
// additions, instead of one f32 chain per element in the CPU's lane order. The state's update does not expand
// (as for the per-token form), so differences do not grow with n (4,000 rows below). Measured on the H200:
// every f32 case within 0.022 of the bound (<= 2^-20.5 max|cpu|). Planted controls: the ones above.
// Cases: the shapes above that the kernels take (the others fall back to the CPU-exact kernels and are
// compared exactly in GatedDeltaRuleChunked) plus partial chunks at both ends.
TEST_F(CudaContract, GatedDeltaRuleChunkedTc) {
  const DeltaCase cases[] = {{1, 2, 4, 128, 128},     {63, 2, 4, 128, 128},  {64, 2, 4, 128, 128},
                             {65, 2, 4, 128, 128},    {130, 2, 4, 128, 128}, {300, 16, 16, 128, 128},
                             {130, 16, 32, 128, 128}, {200, 3, 9, 64, 32},   {90, 2, 2, 32, 48},
                             {40, 1, 3, 96, 80},      {100, 1, 2, 16, 256},  {4000, 1, 4, 128, 128}};
  uint32_t seed = 2600;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        if ((c.hk == 16 || c.n == 4000) && zero_state) continue;  // the large cases once per dtype
        DeltaInputs in(c, act, seed += 10, zero_state);
        const auto ref = run_delta(cpu(), in, one_call(c.n, true)),
                   got = run_delta(dev(), in, one_call(c.n, true));
        const std::string what =
            cat("gdr chunked tc ", delta_str(c, act), zero_state ? " fresh" : " carried");
        EXPECT_TRUE(NearDelta(ref[0], got[0], what + " out"));
        EXPECT_TRUE(NearDelta(ref[1], got[1], what + " state"));
      }
}

TEST_F(CudaContract, GatedDeltaRuleChunkedTcPlantedControl) { delta_planted_controls(cpu(), dev()); }

// Invariance within CUDA, exact: one call against calls cut at multiples of 64 rows (the chunk boundaries
// the CPU reference, the prompt cache and the engine's prefill pieces keep), with and without a carried
// state. Control: one k element of the last token moved (as GatedDeltaRuleSeqSplitInvariance) must show.
TEST_F(CudaContract, GatedDeltaRuleChunkedTcSplitInvariance) {
  const DeltaCase cases[] = {
      {300, 16, 16, 128, 128}, {130, 16, 32, 128, 128}, {200, 3, 9, 64, 32}, {129, 1, 2, 64, 64}};
  uint32_t seed = 2700;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        const std::string what = delta_str(c, act) + (zero_state ? " fresh" : " carried");
        SCOPED_TRACE(what);
        DeltaInputs in(c, act, seed += 10, zero_state);
        const auto one = run_delta(dev(), in, one_call(c.n, true));
        std::vector<int64_t> by64, by128;
        for (int64_t e = 64; e < c.n; e += 64) by64.push_back(e);
        for (int64_t e = 128; e < c.n; e += 128) by128.push_back(e);
        by64.push_back(c.n);
        by128.push_back(c.n);
        for (const auto& cuts : {by64, by128, std::vector<int64_t>{64, c.n}}) {
          const auto got = run_delta(dev(), in, cut_at(cuts, true));
          EXPECT_TRUE(Exact(one[0], got[0])) << "out: one call vs " << cuts.size() << " calls";
          EXPECT_TRUE(Exact(one[1], got[1])) << "state: one call vs " << cuts.size() << " calls";
        }
        DeltaInputs pert(c, act, seed, zero_state);
        pert.k = bump(in.k, ((c.n - 1) * c.hk) * c.dk + 3, act == DType::BF16 ? 1 : 1024);
        EXPECT_TRUE(Differs(one[1], run_delta(dev(), pert, cut_at(by64, true))[1])) << "control: k changed";
      }
}

// ---- the CPU-exact kernels (gated_delta_rule.cu, gated_delta_rule_chunks.cu; the chunked form forced with
// set_cuda_delta_rule_variant(2)): the CPU's arithmetic, bit for bit (the chunked form's prep and
// column-split scan keep every element's sum order) ------------------------------------------------------
struct ExactChunkedVariant {  // the CPU-exact chunked kernels for one test's scope
  ExactChunkedVariant() { EXPECT_TRUE(test_hooks::set_cuda_delta_rule_variant(2)); }
  ~ExactChunkedVariant() { test_hooks::set_cuda_delta_rule_variant(0); }
};

TEST_F(CudaContract, GatedDeltaRuleChunked) {
  const ExactChunkedVariant exact;
  const DeltaCase cases[] = {{1, 2, 4, 128, 128},  {63, 2, 4, 128, 128},    {64, 2, 4, 128, 128},
                             {65, 2, 4, 128, 128}, {130, 2, 4, 128, 128},   {63, 1, 2, 33, 17},
                             {130, 1, 2, 33, 17},  {130, 16, 32, 128, 128}, {4000, 1, 2, 128, 128}};
  uint32_t seed = 2200;
  for (const DeltaCase& c : cases)
    for (DType act : kActs)
      for (bool zero_state : {true, false}) {
        if (c.hk == 16 && !zero_state) continue;  // the realistic shape once per dtype
        DeltaInputs in(c, act, seed += 10, zero_state);
        const auto ref = run_delta(cpu(), in, one_call(c.n, true)),
                   got = run_delta(dev(), in, one_call(c.n, true));
        const std::string what = cat("gdr chunked ", delta_str(c, act), zero_state ? " fresh" : " carried");
        EXPECT_TRUE(Close(ref[0], got[0], what + " out"));
        EXPECT_TRUE(Close(ref[1], got[1], what + " state"));
        EXPECT_TRUE(Exact(ref[0], got[0])) << what << " out: the CPU's bits";
        EXPECT_TRUE(Exact(ref[1], got[1])) << what << " state: the CPU's bits";
      }
}

// ops.h: a call over [0, 64m + r) equals calls over [0, 64m) and [64m, 64m + r) with the state
// carried, bit for bit; checked on the CUDA backend alone, and the split against the CPU's split.
TEST_F(CudaContract, GatedDeltaRuleChunkedSplit) {
  const ExactChunkedVariant exact;
  const DeltaCase c{150, 2, 4, 128, 64};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    DeltaInputs in(c, act, 2300, false);
    const auto one = run_delta(dev(), in, one_call(c.n, true));
    const auto split = run_delta(dev(), in, cut_at({64, 128, c.n}, true));
    EXPECT_TRUE(Exact(one[0], split[0])) << "out: one call vs 64 + 64 + 22";
    EXPECT_TRUE(Exact(one[1], split[1])) << "state: one call vs 64 + 64 + 22";
    const auto cpu_split = run_delta(cpu(), in, cut_at({64, 128, c.n}, true));
    EXPECT_TRUE(Close(cpu_split[0], split[0], "gdr chunked split out " + delta_str(c, act)));
    EXPECT_TRUE(Close(cpu_split[1], split[1], "gdr chunked split state " + delta_str(c, act)));
  }
}

TEST_F(CudaContract, GatedDeltaRuleChunkedPlantedControl) {
  const ExactChunkedVariant exact;
  const DeltaCase c{130, 2, 4, 128, 128};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    DeltaInputs in(c, act, 2400, false);
    const auto got = run_delta(dev(), in, one_call(c.n, true));
    const auto ref = run_delta(cpu(), in, one_call(c.n, true));
    EXPECT_TRUE(Close(ref[0], got[0], "gdr control baseline out"));
    EXPECT_TRUE(Close(ref[1], got[1], "gdr control baseline state"));
    // One ulp on an element of k[129][1] (the last token; earlier ones decay away): the comparator must
    // see it in the output and in the state.
    DeltaInputs pert(c, act, 2400, false);
    auto run_k = [&](const Buffer& k) {
      pert.k = clone(k);
      return std::move(run_delta(cpu(), pert, one_call(c.n, true))[0]);
    };
    const int64_t k0 = (129 * c.hk + 1) * c.dk;
    pert.k = visible_bump(in.k, k0, k0 + c.dk, run_k);
    const auto p = run_delta(cpu(), pert, one_call(c.n, true));
    EXPECT_TRUE(Differs(p[0], got[0])) << "out, k + 1 ulp";
    EXPECT_TRUE(Differs(p[1], got[1])) << "state, k + 1 ulp";
    // A larger change (beta[129][1] -> 0) must also fail the tolerant check.
    pert.k = clone(in.k);
    pert.beta = poke(in.beta, 129 * c.hv + 1, -load_f32(in.beta.view(), 129 * c.hv + 1));
    const auto p2 = run_delta(cpu(), pert, one_call(c.n, true));
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
      const auto cuts = cut_at({c.n, c.n + 1}, false);
      const auto ref = run_delta(cpu(), in, cuts), got = run_delta(dev(), in, cuts);
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
      const Buffer got = run(dev());
      EXPECT_TRUE(Close(run(cpu()), got, cat("rms_norm_gated [", c.n, ", ", c.d, "] ", dtype_name(act))));
      if (c.n < 128) continue;
      // Rows 5..11 alone run the block form, inside the whole call the warp form: the same bits.
      auto dx = upload_new(dev(), rows_of(x, 5, 12)), dz = upload_new(dev(), rows_of(z, 5, 12)),
           dw = upload_new(dev(), w);
      auto out = dev().alloc(act, {7, c.d});
      dev().rms_norm_gated(dx, dz, dw, 1e-6f, out);
      EXPECT_TRUE(Exact(rows_of(got, 5, 12), fetch(dev(), out)))
          << cat("rms_norm_gated [", c.n, ", ", c.d, "] ", dtype_name(act), ": 7 rows alone");
    }
}

// ---- vision: rope_f32, embedding_bag ---------------------------------------------------------
TEST_F(CudaContract, RopeF32) {
  struct Case {
    int64_t n, heads, d;
  };
  uint32_t seed = 2700;
  for (const Case c : {Case{1, 16, 72}, Case{7, 3, 80}, Case{333, 2, 34}, Case{5, 1, 2}, Case{300, 12, 64}})
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
