// The tensor-core ops against the CPU reference (linear_tc.cu, attention_tc.cu): bf16 linear and
// flash attention are held to the CPU op by a stated tolerance, each with planted controls the
// comparator must catch; their f32 forms still run the CPU's arithmetic and must be bit-identical.
// Batch invariance (a row alone, chunked, or inside calls of other sizes) is exact on the CUDA
// backend. Skips where create_backend("cuda") fails. The other ops: cuda_contract_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <tuple>
#include <utility>

#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};
constexpr DType kBF16 = DType::BF16;

// ---- linear ----------------------------------------------------------------------------------
// out in x's dtype unless `out_dt` says otherwise (the op allows bf16 x with an f32 out: the f32
// accumulation's bits, before any rounding, which makes invariance checks sharper).
Buffer run_linear(Backend& be, const Buffer& x, const Buffer& w, const Buffer* bias,
                  std::optional<DType> out_dt = std::nullopt) {
  auto dx = upload_new(be, x), dw = upload_new(be, w);
  DeviceBuffer db;
  if (bias) db = upload_new(be, *bias);
  auto out = be.alloc(out_dt.value_or(x.dtype()), {x.shape()[0], w.shape()[0]});
  be.linear(dx, dw, bias ? &db.tensor() : nullptr, out);
  return fetch(be, out);
}

// bf16 x and w run on tensor cores (linear_tc.cu): k in fixed chunks of 256, each chunk an mma chain
// from zero, the chunk partials added in f32 in chunk order, then bias and one rounding. That is a
// different order than the CPU's 8-lane f32 dot, and the tensor core's internal additions are not IEEE
// round-to-nearest (they truncate): with one chain over all of k the two sums were measured on the
// H200 up to 0.99·2^-16·Σ_k|x_k w_k| apart (K <= 3072); chunking only shortens the truncating chains
// and adds at most in_f/256 round-to-nearest f32 additions (each <= 2^-24 Σ|x w|, < 2^-18 Σ|x w| in
// all for K <= 12,288), and the final bf16 rounding can then land one bf16 ulp apart. Tolerance per
// element (unchanged): |cuda - cpu| <= ulp_bf16(cpu) + 2^-14 (Σ_k |x_k w_k| + |bias|). Where an output
// cancels (|out| << Σ|x w|) that allows many ulps of the small result; a wrong kernel is off by
// O(Σ|x w| / sqrt(K)), far outside. f32 activations or weights run the CPU's arithmetic: exact.
bool tensor_core_linear(DType act, DType wt) { return act == kBF16 && wt == kBF16; }

// The per-element bound above, as a buffer of out's shape (f32).
std::vector<double> linear_bound(const Buffer& ref, const Buffer& x, const Buffer& w, const Buffer* bias) {
  const int64_t n = x.shape()[0], in_f = x.shape()[1], out_f = w.shape()[0];
  std::vector<float> xf(static_cast<size_t>(x.numel())), wf(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) xf[static_cast<size_t>(i)] = std::fabs(load_f32(x.view(), i));
  for (int64_t i = 0; i < w.numel(); ++i) wf[static_cast<size_t>(i)] = std::fabs(load_f32(w.view(), i));
  std::vector<double> bound(static_cast<size_t>(n * out_f));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < out_f; ++j) {
      double s = bias ? std::fabs(load_f32(bias->view(), j)) : 0.0;
      const float* xr = &xf[static_cast<size_t>(i * in_f)];
      const float* wr = &wf[static_cast<size_t>(j * in_f)];
      for (int64_t k = 0; k < in_f; ++k) s += static_cast<double>(xr[k]) * wr[k];
      const double r = std::fabs(load_f32(ref.view(), i * out_f + j));
      const double ulp = r > 0 ? std::ldexp(1.0, std::ilogb(r) - 7) : std::ldexp(1.0, -133);
      bound[static_cast<size_t>(i * out_f + j)] = ulp + std::ldexp(s, -14);
    }
  return bound;
}

::testing::AssertionResult NearLinear(const Buffer& ref, const Buffer& got, const std::vector<double>& bound,
                                      const std::string& what) {
  const Diff d = diff(ref, got);
  double worst = 0;  // largest |diff| / bound
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double e = std::fabs(static_cast<double>(load_f32(ref.view(), i)) - load_f32(got.view(), i));
    worst = std::max(worst, std::isnan(e) ? INFINITY : e / bound[static_cast<size_t>(i)]);
  }
  std::printf("[ contract ] %s: %s; largest |diff| / bound %.3f\n", what.c_str(), d.str().c_str(), worst);
  if (d.error.empty() && worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": outside the tolerance (|diff| / bound " << worst << ")";
}

TEST_F(CudaContract, Linear) {
  struct Case {
    int64_t n, in_f, out_f;
  };
  // Every configuration of the tensor-core kernel (n <= 16: 8 or 16 columns per block, 4 or 8 warps;
  // n <= 64; n <= 128; larger), in_f below, at and past the 256 chunk, not a multiple of it, and odd
  // (element loads instead of cp.async).
  const Case cases[] = {{1, 67, 33},    {3, 1000, 257},   {7, 33, 7},       {33, 67, 1000},
                        {257, 35, 19},  {17, 1024, 3072}, {300, 588, 1024}, {129, 2048, 200},
                        {1, 256, 130},  {16, 3000, 300},  {2, 1304, 4300},  {5, 2600, 4400},
                        {64, 3001, 77}, {40, 200, 520},   {65, 1000, 64},   {9, 12289, 40}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (DType act : kActs)
      for (DType wt : kActs)
        for (bool with_bias : {false, true}) {
          const float sd = 1.0f / std::sqrt(static_cast<float>(c.in_f));
          Buffer x = randn(act, {c.n, c.in_f}, seed++), w = randn(wt, {c.out_f, c.in_f}, seed++, sd),
                 b = randn(wt, {c.out_f}, seed++);
          const Buffer* pb = with_bias ? &b : nullptr;
          const std::string what = cat("linear ", c.n, "x", c.in_f, "->", c.out_f, " act ", dtype_name(act),
                                       " w ", dtype_name(wt), with_bias ? " +bias" : "");
          const Buffer ref = run_linear(cpu(), x, w, pb), got = run_linear(dev(), x, w, pb);
          if (tensor_core_linear(act, wt))
            EXPECT_TRUE(NearLinear(ref, got, linear_bound(ref, x, w, pb), what));
          else
            EXPECT_TRUE(Exact(ref, got)) << what;
        }
}

TEST_F(CudaContract, LinearPlantedControl) {
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    Buffer x = randn(act, {7, 1000}, 11), w = randn(kBF16, {257, 1000}, 12, 0.03f);
    const Buffer got = run_linear(dev(), x, w, nullptr), ref = run_linear(cpu(), x, w, nullptr);
    if (tensor_core_linear(act, kBF16)) {
      const std::vector<double> bound = linear_bound(ref, x, w, nullptr);
      EXPECT_TRUE(NearLinear(ref, got, bound, "linear control baseline"));
      const int64_t e = 3 * 257 + 100;  // one output moved by twice its bound
      EXPECT_FALSE(NearLinear(poke(ref, e, static_cast<float>(2 * bound[e])), got, bound,
                              "control: out[3][100] + 2 bound"));
      EXPECT_FALSE(NearLinear(run_linear(cpu(), x, poke(w, 100 * 1000 + 7, 0.25f), nullptr), got, bound,
                              "control: w[100][7] + 0.25"));
      continue;
    }
    EXPECT_TRUE(Exact(ref, got));
    auto cpu_run = [&](const Buffer& xx) { return run_linear(cpu(), xx, w, nullptr); };
    EXPECT_TRUE(Differs(cpu_run(visible_bump(x, 3 * 1000 + 500, 4 * 1000, cpu_run)), got))
        << "x row 3 + 1 ulp";
    EXPECT_TRUE(Differs(run_linear(cpu(), x, poke(w, 100 * 1000 + 7, 0.25f), nullptr), got))
        << "w[100][7] + 0.25";
  }
}

// A row computed alone or inside calls of 8, 37 and 256 rows gives the same bits on the CUDA backend
// (every tile configuration of the tensor-core kernel: <= 16, <= 128 and > 128 rows).
TEST_F(CudaContract, BatchInvarianceLinear) {
  struct Case {
    int64_t in_f, out_f;
  };
  for (const Case c : {Case{1024, 3072}, Case{67, 257}, Case{588, 130}})
    for (DType act : kActs) {
      SCOPED_TRACE(cat(c.in_f, "->", c.out_f, " ", dtype_name(act)));
      Buffer x = randn(act, {256, c.in_f}, 21), w = randn(kBF16, {c.out_f, c.in_f}, 22, 0.03f),
             b = randn(kBF16, {c.out_f}, 23);
      const Buffer full = run_linear(dev(), x, w, &b), ref = run_linear(cpu(), x, w, &b);
      if (tensor_core_linear(act, kBF16))
        EXPECT_TRUE(NearLinear(ref, full, linear_bound(ref, x, w, &b), "linear 256 rows"));
      else
        EXPECT_TRUE(Exact(ref, full));
      for (int64_t r : {0, 1, 18, 36, 200, 255})
        EXPECT_TRUE(Exact(rows_of(full, r, r + 1), run_linear(dev(), rows_of(x, r, r + 1), w, &b)))
            << "row " << r;
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{8, 16}, {0, 37}, {100, 137}, {7, 250}})
        EXPECT_TRUE(Exact(rows_of(full, r0, r1), run_linear(dev(), rows_of(x, r0, r1), w, &b)))
            << "rows " << r0 << ".." << r1;
      EXPECT_TRUE(Differs(rows_of(full, 1, 2), run_linear(dev(), rows_of(x, 0, 1), w, &b))) << "control";
    }
}

// Calls of each row count in kRowCounts (the <= 16-row chunks kernel: 1, 2, 7, 16; the <= 64-row one:
// 17, 33, 64; the tiled kernels, chunks summed in registers: 65, 129, 256), each at up to three offsets,
// against the same rows of one 256-row call. Prints one line per row count that differs (with the first
// differing element) or one line saying every call matched; returns the row counts that differed.
constexpr int64_t kRowCounts[] = {1, 2, 7, 16, 17, 33, 64, 65, 129, 256};

std::vector<int64_t> linear_invariance(Backend& dev, const Buffer& x, const Buffer& w, const Buffer* b,
                                       DType out_dt, const std::string& what) {
  const int64_t n = x.shape()[0];
  const Buffer full = run_linear(dev, x, w, b, out_dt);
  std::vector<int64_t> differ;
  int64_t calls = 0;
  for (int64_t rows : kRowCounts) {
    std::vector<int64_t> offsets = {0, (n - rows) / 2 + 1, n - rows};
    offsets.erase(std::remove_if(offsets.begin(), offsets.end(), [&](int64_t r0) { return r0 + rows > n; }),
                  offsets.end());
    std::sort(offsets.begin(), offsets.end());
    offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
    for (int64_t r0 : offsets) {
      ++calls;
      const Diff d =
          diff(rows_of(full, r0, r0 + rows), run_linear(dev, rows_of(x, r0, r0 + rows), w, b, out_dt));
      if (d.error.empty() && d.differ == 0) continue;
      std::printf("[ contract ] %s: a call of %lld rows at row %lld differs from the %lld-row call: %s\n",
                  what.c_str(), static_cast<long long>(rows), static_cast<long long>(r0),
                  static_cast<long long>(n), d.str().c_str());
      if (differ.empty() || differ.back() != rows) differ.push_back(rows);
    }
  }
  if (differ.empty())
    std::printf("[ contract ] %s: %lld calls of 1..256 rows, every row bit-identical to the %lld-row call\n",
                what.c_str(), static_cast<long long>(calls), static_cast<long long>(n));
  return differ;
}

// Batch invariance across every configuration of the tensor-core linear, exact bits, for outputs in
// bf16 and in f32 (the f32 accumulation itself, where a different chunking or order would show in
// almost every element). in_f below the 256 chunk (200), past it and not a multiple of it (1000), twelve
// chunks (3000: two rounds of 8 warps in the small-row kernel), odd (1001: element loads); out_f small or
// wide enough for 16-column blocks (4300, 4240). Each 256-row result is also held to the CPU tolerance.
TEST_F(CudaContract, BatchInvarianceLinearRowCounts) {
  struct Case {
    int64_t in_f, out_f;
  };
  uint32_t seed = 60;
  for (const Case c : {Case{200, 72}, Case{1000, 130}, Case{3000, 520}, Case{1001, 4300}, Case{2056, 4240}}) {
    Buffer x = randn(kBF16, {256, c.in_f}, seed++), w = randn(kBF16, {c.out_f, c.in_f}, seed++, 0.03f),
           b = randn(kBF16, {c.out_f}, seed++);
    const std::string name = cat("linear ", c.in_f, "->", c.out_f);
    const Buffer ref = run_linear(cpu(), x, w, &b), full = run_linear(dev(), x, w, &b);
    EXPECT_TRUE(NearLinear(ref, full, linear_bound(ref, x, w, &b), name + " 256 rows vs cpu"));
    for (DType out_dt : kActs) {
      const std::vector<int64_t> differ =
          linear_invariance(dev(), x, w, &b, out_dt, cat(name, " out ", dtype_name(out_dt)));
      EXPECT_TRUE(differ.empty()) << name << " out " << dtype_name(out_dt) << ": " << differ.size()
                                  << " row counts differ from the 256-row call";
    }
  }
}

// The tile configurations for more than 128 rows (0: sums in shared memory, 128 x 128 blocks, the
// default; 1: sums in registers, 128 x 64 blocks; 2..: the swizzled candidates of linear_tc_large.cu) are
// a speed choice only: the same rows in f32 and bf16, bit for bit, as config 0, and equal to the
// small-row kernel's rows. The shapes reach every edge of the candidates: rows not a multiple of any
// block (129, 257, 300, 777), out_f odd (131: single stores) and not a multiple of 64, in_f below one
// chunk (200: one partial k tile), not a multiple of 64 or 16 (1000: a partial tile ending in a
// zero-padded 16-step), twelve chunks with a partial one (3000), odd (1001: no 16-byte copies, so the
// candidates fall back to config 0), and bias or none.
TEST_F(CudaContract, BatchInvarianceLinearLargeConfigs) {
  struct Restore {
    ~Restore() { test_hooks::set_cuda_linear_large_config(test_hooks::cuda_linear_large_default()); }
  } restore;
  const int n_cfg = test_hooks::cuda_linear_large_configs();
  ASSERT_GE(n_cfg, 2);
  struct Case {
    int64_t n, in_f, out_f;
    bool bias;
  };
  uint32_t seed = 90;
  for (const Case c : {Case{300, 1024, 4096, false}, Case{777, 4096, 1000, true}, Case{129, 1001, 72, false},
                       Case{2333, 1024, 1024, false}, Case{257, 1000, 131, true}, Case{400, 200, 264, true},
                       Case{1000, 3000, 520, false}}) {
    Buffer x = randn(kBF16, {c.n, c.in_f}, seed++), w = randn(kBF16, {c.out_f, c.in_f}, seed++, 0.03f),
           b = randn(kBF16, {c.out_f}, seed++);
    const Buffer* bp = c.bias ? &b : nullptr;
    for (DType out_dt : kActs) {
      const std::string what = cat("linear ", c.n, "x", c.in_f, "->", c.out_f, c.bias ? " +bias" : "",
                                   " out ", dtype_name(out_dt));
      ASSERT_TRUE(test_hooks::set_cuda_linear_large_config(0));
      const Buffer ref = run_linear(dev(), x, w, bp, out_dt);
      EXPECT_TRUE(Exact(rows_of(ref, 5, 6), run_linear(dev(), rows_of(x, 5, 6), w, bp, out_dt)))
          << what << ": row 5 alone";
      for (int cfg = 1; cfg < n_cfg; ++cfg) {
        ASSERT_TRUE(test_hooks::set_cuda_linear_large_config(cfg));
        EXPECT_TRUE(Exact(ref, run_linear(dev(), x, w, bp, out_dt)))
            << what << ": config " << cfg << " (" << test_hooks::cuda_linear_large_config_name(cfg)
            << ") against config 0";
      }
    }
  }
}

// Planted control for the check above: the test hook makes the <= 16-row configuration alone cut k into
// chunks of 128 instead of 256. That only reorders f32 additions, so the CPU tolerance cannot see it
// (checked below), but a row's bits now depend on the call size: with f32 outputs the calls of 1, 2, 7
// and 16 rows must differ from the 256-row call and every larger call must still match. (bf16 outputs
// would hide most such reorderings in the rounding; the invariance test checks both.)
TEST_F(CudaContract, BatchInvarianceLinearPlantedControl) {
  struct Plant {  // restores the contract's chunk even when an assertion fails
    bool on = test_hooks::set_cuda_linear_small_rows_chunk(128);
    ~Plant() { test_hooks::set_cuda_linear_small_rows_chunk(0); }
  };
  Buffer x = randn(kBF16, {256, 1000}, 71), w = randn(kBF16, {130, 1000}, 72, 0.03f),
         b = randn(kBF16, {130}, 73);
  {
    Plant plant;
    ASSERT_TRUE(plant.on) << "the CUDA build has the test hook";
    const Buffer x7 = rows_of(x, 3, 10), ref = run_linear(cpu(), x7, w, &b),
                 got = run_linear(dev(), x7, w, &b);
    EXPECT_TRUE(NearLinear(ref, got, linear_bound(ref, x7, w, &b), "planted chunk 128, 7 rows vs cpu"));
    const std::vector<int64_t> differ =
        linear_invariance(dev(), x, w, &b, DType::F32, "control: chunk 128 for <= 16 rows, out f32");
    EXPECT_EQ(differ, (std::vector<int64_t>{1, 2, 7, 16})) << "planted control not caught as expected";
  }
  EXPECT_TRUE(linear_invariance(dev(), x, w, &b, DType::F32, "control removed, out f32").empty());
}

// ---- attention -------------------------------------------------------------------------------
enum class Keys { kCausal, kAll, kBlocks, kRandom };

// key_ranges[n_q, 2] for the last n_q positions of n_k keys (causal), all keys, a block-diagonal
// split at n/64, n/5 (vision images), or random non-empty ranges.
std::vector<int32_t> key_ranges(Keys kind, int64_t n_q, int64_t n_k, uint32_t seed) {
  std::vector<int32_t> r(static_cast<size_t>(2 * n_q));
  const int32_t cuts[] = {0, static_cast<int32_t>(n_k / 64 + 1), static_cast<int32_t>(n_k / 5 + 2),
                          static_cast<int32_t>(n_k)};
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n_q; ++i) {
    int32_t b = 0, e = static_cast<int32_t>(n_k);
    if (kind == Keys::kCausal) e = static_cast<int32_t>(n_k - n_q + i + 1);
    if (kind == Keys::kBlocks)
      for (int s = 0; s < 3; ++s)
        if (i >= cuts[s] && i < cuts[s + 1]) b = cuts[s], e = cuts[s + 1];
    if (kind == Keys::kRandom) {
      b = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_k));
      e = b + 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(n_k - b));
      if (i % 5 == 0) b = 0, e = static_cast<int32_t>(n_k);  // some rows see every key
      if (i % 7 == 3) e = b + 1;                             // and some exactly one
    }
    r[2 * i] = b;
    r[2 * i + 1] = e;
  }
  return r;
}

Buffer run_attention(Backend& be, const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& ranges) {
  auto dq = upload_new(be, q), dk = upload_new(be, k), dv = upload_new(be, v), dr = upload_new(be, ranges);
  auto out = be.alloc(q.dtype(), q.shape());
  be.attention(dq, dk, dv, dr, 1.0f / std::sqrt(static_cast<float>(q.shape()[2])), out);
  return fetch(be, out);
}

struct AttnCase {
  int64_t n_q, n_k, heads, kvh, d;
  Keys keys;
  float sd;
};

struct AttnInputs {
  Buffer q, k, v, ranges;
  AttnInputs(const AttnCase& c, DType act, uint32_t seed)
      : q(randn(act, {c.n_q, c.heads, c.d}, seed, c.sd)),
        k(randn(act, {c.n_k, c.kvh, c.d}, seed + 1, c.sd)),
        v(randn(act, {c.n_k, c.kvh, c.d}, seed + 2)),
        ranges(i32({c.n_q, 2}, key_ranges(c.keys, c.n_q, c.n_k, seed + 3))) {}
};

// bf16 attention with head_dim % 8 == 0 runs the flash kernel (attention_tc.cu): P is rounded to
// bf16 relative to the running maximum of its key tile instead of the row's global maximum, so each
// rnd(p_j) may differ from the CPU's by one bf16 step (2^-8 relative); out = Σ rnd(p_j) v_j / l then
// moves by at most 2^-8 · max|v| plus its own rounding (2^-8 |out| <= 2^-8 max|v|). Tolerance:
// |diff| <= max|v| / 128 per element. f32 (and odd head_dim) run the CPU's arithmetic: exact.
bool flash_attention(DType act, int64_t d) { return act == kBF16 && d % 8 == 0 && d <= 256; }
double attention_tol(const Buffer& v) {
  double m = 0;
  for (int64_t i = 0; i < v.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(load_f32(v.view(), i))));
  return m / 128;
}

TEST_F(CudaContract, Attention) {
  const AttnCase cases[] = {
      {7, 7, 4, 2, 64, Keys::kCausal, 1},        // prefill, GQA 2
      {1, 600, 8, 1, 128, Keys::kCausal, 1},     // decode over more than 512 keys, GQA 8
      {33, 1033, 16, 4, 128, Keys::kCausal, 1},  // chunk continuation on a cache
      {5, 520, 8, 2, 256, Keys::kCausal, 1},     // head_dim 256 (Qwen3.5)
      {333, 333, 4, 4, 72, Keys::kBlocks, 1},    // block-diagonal vision attention
      {300, 300, 2, 2, 64, Keys::kBlocks, 3},    // vision with peaky scores (Pixtral head_dim)
      {37, 700, 6, 3, 33, Keys::kRandom, 2},     // random ranges, odd head_dim, peaky scores
      {70, 700, 6, 3, 80, Keys::kRandom, 2},     // random ranges on the flash kernel
      {3, 1, 2, 1, 7, Keys::kAll, 1},            // a single key
  };
  uint32_t seed = 400;
  for (const AttnCase& c : cases)
    for (DType act : kActs) {
      AttnInputs in(c, act, seed += 10);
      const std::string what = cat("attention q [", c.n_q, ", ", c.heads, ", ", c.d, "] kv [", c.n_k, ", ",
                                   c.kvh, "] keys ", static_cast<int>(c.keys), " ", dtype_name(act));
      const Buffer ref = run_attention(cpu(), in.q, in.k, in.v, in.ranges),
                   got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      if (flash_attention(act, c.d))
        EXPECT_TRUE(NearAbs(ref, got, what, attention_tol(in.v)));
      else
        EXPECT_TRUE(Close(ref, got, what));
    }
}

TEST_F(CudaContract, AttentionPlantedControl) {
  const AttnCase c{5, 520, 8, 2, 256, Keys::kCausal, 1};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    AttnInputs in(c, act, 450);
    const Buffer got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    const Buffer ref = run_attention(cpu(), in.q, in.k, in.v, in.ranges);
    const int64_t q0 = (2 * 8 + 3) * 256, k0 = (100 * 2 + 1) * 256;  // q[2][3][:], k[100][1][:]
    if (flash_attention(act, c.d)) {
      const double tol = attention_tol(in.v);
      EXPECT_TRUE(NearAbs(ref, got, "attention control baseline", tol));
      EXPECT_FALSE(
          NearAbs(poke(ref, q0 + 5, static_cast<float>(3 * tol)), got, "control: out[2][3][5] + 3 tol", tol));
      Buffer v2 = clone(in.v);  // v[100][1][:] += 200: every row attends key 100
      for (int64_t i = k0; i < k0 + 256; ++i) store_f32(v2.view(), i, load_f32(v2.view(), i) + 200.0f);
      EXPECT_FALSE(
          NearAbs(run_attention(cpu(), in.q, in.k, v2, in.ranges), got, "control: v[100][1] + 200", tol));
      continue;
    }
    EXPECT_TRUE(Close(ref, got, "attention control baseline"));
    auto run_q = [&](const Buffer& q) { return run_attention(cpu(), q, in.k, in.v, in.ranges); };
    auto run_k = [&](const Buffer& k) { return run_attention(cpu(), in.q, k, in.v, in.ranges); };
    EXPECT_TRUE(Differs(run_q(visible_bump(in.q, q0, q0 + 256, run_q)), got)) << "q[2][3] + 1 ulp";
    EXPECT_TRUE(Differs(run_k(visible_bump(in.k, k0, k0 + 256, run_k)), got)) << "k[100][1] + 1 ulp";
  }
}

// Query rows alone, in chunks (prefill split into calls), or inside calls of 37 and 150 rows over a
// 600-key cache give the same bits on the CUDA backend; so do vision rows next to other images.
TEST_F(CudaContract, BatchInvarianceAttention) {
  for (int64_t d : {64, 128, 256})
    for (DType act : kActs) {
      SCOPED_TRACE(cat("head_dim ", d, " ", dtype_name(act)));
      const AttnCase c{150, 600, 16, 4, d, Keys::kCausal, 1};
      AttnInputs in(c, act, 500);
      const Buffer full = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      auto part = [&](int64_t r0, int64_t r1) {
        return run_attention(dev(), rows_of(in.q, r0, r1), in.k, in.v, rows_of(in.ranges, r0, r1));
      };
      for (int64_t r : {0, 1, 18, 36, 64, 149})
        EXPECT_TRUE(Exact(rows_of(full, r, r + 1), part(r, r + 1))) << "row " << r;
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 37}, {37, 101}, {101, 150}, {5, 13}})
        EXPECT_TRUE(Exact(rows_of(full, r0, r1), part(r0, r1))) << "rows " << r0 << ".." << r1;
      EXPECT_TRUE(Differs(rows_of(full, 1, 2),
                          run_attention(dev(), rows_of(in.q, 0, 1), in.k, in.v, rows_of(in.ranges, 1, 2))))
          << "control: row 0's query with row 1's range";
    }
  for (DType act : kActs) {  // block-diagonal: images of 10, 66 and 257 patches in one call
    const AttnCase c{333, 333, 4, 4, 64, Keys::kBlocks, 1};
    AttnInputs in(c, act, 520);
    const Buffer full = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    for (int64_t r : {0, 9, 10, 70, 332})
      EXPECT_TRUE(Exact(rows_of(full, r, r + 1), run_attention(dev(), rows_of(in.q, r, r + 1), in.k, in.v,
                                                               rows_of(in.ranges, r, r + 1))))
          << "vision row " << r << " " << dtype_name(act);
  }
}

// ---- paged attention ---------------------------------------------------------------------------
// Segments of several sequences in one call over a shared block pool (the batched engine's step):
// decode rows, a draft verification, a prefill chunk. Their blocks are scattered over the pool.
struct PagedCase {
  std::vector<int64_t> q_rows, n_keys;  // per segment: query rows (the last ones), keys
};

struct PagedInputs {
  Buffer q, k_pool, v_pool, tables, seg_rows, ranges;
  std::vector<std::vector<int32_t>> blocks;  // per segment
  int64_t n_q = 0, max_blocks = 1;
  PagedInputs(const PagedCase& c, DType act, int64_t heads, int64_t kvh, int64_t d, uint32_t seed) {
    const size_t n_seg = c.q_rows.size();
    int64_t need = 0;
    for (size_t s = 0; s < n_seg; ++s) {
      n_q += c.q_rows[s];
      need += (c.n_keys[s] + kKvBlock - 1) / kKvBlock;
      max_blocks = std::max(max_blocks, (c.n_keys[s] + kKvBlock - 1) / kKvBlock);
    }
    const int64_t pool_blocks = need + 5;
    std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
    for (int64_t i = 0; i < pool_blocks; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    std::vector<int32_t> tab(n_seg * static_cast<size_t>(max_blocks), 0), sr{0}, rg;
    size_t next = 0;
    for (size_t s = 0; s < n_seg; ++s) {
      blocks.emplace_back();
      for (int64_t b = 0; b * kKvBlock < c.n_keys[s]; ++b) {
        blocks[s].push_back(ids[next++]);
        tab[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = blocks[s].back();
      }
      sr.push_back(sr.back() + static_cast<int32_t>(c.q_rows[s]));
      for (int64_t i = 0; i < c.q_rows[s]; ++i) {  // causal: the segment's last q_rows positions
        rg.push_back(0);
        rg.push_back(static_cast<int32_t>(c.n_keys[s] - c.q_rows[s] + i + 1));
      }
    }
    q = randn(act, {n_q, heads, d}, seed + 1);
    k_pool = randn(act, {pool_blocks * kKvBlock, kvh, d}, seed + 2);
    v_pool = randn(act, {pool_blocks * kKvBlock, kvh, d}, seed + 3);
    tables = i32({static_cast<int64_t>(n_seg), max_blocks}, tab);
    seg_rows = i32({static_cast<int64_t>(n_seg) + 1}, sr);
    ranges = i32({n_q, 2}, rg);
  }
  // Segment s's keys gathered contiguously: [n_keys, kvh, d].
  Buffer gather(const Buffer& pool, size_t s, int64_t n_keys) const {
    const int64_t row = pool.numel() / pool.shape()[0];
    Buffer out(pool.dtype(), {n_keys, pool.shape()[1], pool.shape()[2]});
    const size_t es = dtype_size(pool.dtype());
    for (int64_t j = 0; j < n_keys; ++j) {
      const int64_t src = blocks[s][static_cast<size_t>(j / kKvBlock)] * kKvBlock + j % kKvBlock;
      std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(j * row) * es,
                  static_cast<const char*>(pool.data()) + static_cast<size_t>(src * row) * es,
                  static_cast<size_t>(row) * es);
    }
    return out;
  }
};

Buffer run_paged(Backend& be, const PagedInputs& in, const Buffer* tables = nullptr) {
  auto dq = upload_new(be, in.q), dk = upload_new(be, in.k_pool), dv = upload_new(be, in.v_pool),
       dt = upload_new(be, tables ? *tables : in.tables), ds = upload_new(be, in.seg_rows),
       dr = upload_new(be, in.ranges);
  auto out = be.alloc(in.q.dtype(), in.q.shape());
  be.paged_attention(dq, dk, dv, dt, ds, dr, 1.0f / std::sqrt(static_cast<float>(in.q.shape()[2])), out);
  return fetch(be, out);
}

// CUDA against the CPU reference (the flash tolerance for bf16, exact for f32), and each segment's rows
// bit-identical to attention() over its keys laid out contiguously, alone: neither the pool layout nor
// the other segments of the step change a row. Control: one swapped table entry must change the rows.
TEST_F(CudaContract, PagedAttention) {
  const PagedCase c{{1, 1, 5, 130, 1, 64}, {1, 700, 69, 300, 64, 64}};
  for (int64_t d : {64, 128})
    for (DType act : kActs) {
      SCOPED_TRACE(cat("head_dim ", d, " ", dtype_name(act)));
      PagedInputs in(c, act, 8, 2, d, 900 + static_cast<uint32_t>(d));
      const Buffer ref = run_paged(cpu(), in), got = run_paged(dev(), in);
      if (flash_attention(act, d))
        EXPECT_TRUE(NearAbs(ref, got, cat("paged attention d ", d), attention_tol(in.v_pool)));
      else
        EXPECT_TRUE(Close(ref, got, cat("paged attention d ", d)));
      int64_t r0 = 0;
      for (size_t s = 0; s < c.q_rows.size(); ++s) {
        const int64_t r1 = r0 + c.q_rows[s];
        const Buffer k = in.gather(in.k_pool, s, c.n_keys[s]), v = in.gather(in.v_pool, s, c.n_keys[s]);
        EXPECT_TRUE(Exact(rows_of(got, r0, r1),
                          run_attention(dev(), rows_of(in.q, r0, r1), k, v, rows_of(in.ranges, r0, r1))))
            << "segment " << s << " against contiguous attention";
        EXPECT_TRUE(Exact(rows_of(ref, r0, r1),
                          run_attention(cpu(), rows_of(in.q, r0, r1), k, v, rows_of(in.ranges, r0, r1))))
            << "CPU segment " << s << " against contiguous attention";
        r0 = r1;
      }
      Buffer swapped = clone(in.tables.view());  // segment 1 (700 keys): its first two blocks exchanged
      auto* t = static_cast<int32_t*>(swapped.data());
      std::swap(t[in.max_blocks], t[in.max_blocks + 1]);
      EXPECT_TRUE(Differs(rows_of(got, 1, 2), rows_of(run_paged(dev(), in, &swapped), 1, 2)))
          << "control: a swapped block table entry";
    }
}

// The attention variants (test_hooks::set_cuda_attention_variant; attention_tc_wide.cu: wider query tiles,
// q in registers, deeper K/V pipelines, unmasked full tiles, skipped dead tiles) run each row's
// arithmetic exactly as variant 0: every call below must give variant 0's bits, whole, for causal
// chunks over a cache (GQA), vision images side by side, random ranges (many passes, rows that see one
// key, dead tiles), a large all-keys call, the paged form with long segments, and calls they leave to
// variant 0 (head_dim 256, few rows). Rows of a variant call cut into other calls (>= 64 rows, so they
// run the variant too) match as well; and one case per variant is held to the CPU tolerance.
TEST_F(CudaContract, AttentionVariants) {
  struct Restore {
    ~Restore() { test_hooks::set_cuda_attention_variant(test_hooks::cuda_attention_default()); }
  } restore;
  const int n_var = test_hooks::cuda_attention_variants();
  ASSERT_GE(n_var, 1);
  const AttnCase cases[] = {
      {150, 600, 16, 4, 64, Keys::kCausal, 1}, {150, 600, 16, 4, 128, Keys::kCausal, 1},
      {333, 333, 4, 4, 64, Keys::kBlocks, 1},  {333, 333, 4, 4, 72, Keys::kBlocks, 1},
      {300, 700, 6, 3, 80, Keys::kRandom, 2},  {1100, 1100, 2, 2, 64, Keys::kAll, 3},
      {200, 520, 8, 2, 256, Keys::kCausal, 1}, {7, 7, 4, 2, 64, Keys::kCausal, 1},
      {129, 129, 16, 16, 64, Keys::kAll, 1},
  };
  uint32_t seed = 700;
  for (const AttnCase& c : cases) {
    AttnInputs in(c, kBF16, seed += 10);
    const std::string what = cat("attention q [", c.n_q, ", ", c.heads, ", ", c.d, "] kv [", c.n_k, ", ",
                                 c.kvh, "] keys ", static_cast<int>(c.keys));
    ASSERT_TRUE(test_hooks::set_cuda_attention_variant(0));
    const Buffer ref = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    for (int var = 1; var < n_var; ++var) {
      ASSERT_TRUE(test_hooks::set_cuda_attention_variant(var));
      const Buffer got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      EXPECT_TRUE(Exact(ref, got)) << what << ": variant " << var << " against variant 0";
      if (c.n_q >= 128) {
        const int64_t r0 = c.n_q / 3, r1 = c.n_q;  // a later chunk of >= 64 rows, alone
        EXPECT_TRUE(Exact(rows_of(got, r0, r1), run_attention(dev(), rows_of(in.q, r0, r1), in.k, in.v,
                                                              rows_of(in.ranges, r0, r1))))
            << what << ": variant " << var << ", rows " << r0 << ".." << r1 << " alone";
      }
      if (&c == &cases[2] || &c == &cases[4]) {
        EXPECT_TRUE(NearAbs(run_attention(cpu(), in.q, in.k, in.v, in.ranges), got,
                            cat(what, " variant ", var, " vs cpu"), attention_tol(in.v)));
      }
    }
  }
  const PagedCase pc{{130, 200, 64}, {200, 200, 700}};
  for (int64_t d : {64, 128}) {
    PagedInputs in(pc, kBF16, 8, 2, d, 950 + static_cast<uint32_t>(d));
    ASSERT_TRUE(test_hooks::set_cuda_attention_variant(0));
    const Buffer ref = run_paged(dev(), in);
    for (int var = 1; var < n_var; ++var) {
      ASSERT_TRUE(test_hooks::set_cuda_attention_variant(var));
      EXPECT_TRUE(Exact(ref, run_paged(dev(), in))) << "paged d " << d << ": variant " << var << " against 0";
    }
  }
}

}  // namespace
