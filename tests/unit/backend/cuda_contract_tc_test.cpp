// The tensor-core linear against the CPU reference (linear_tc.cu): bf16 held to the CPU op by a stated
// tolerance, with planted controls the comparator must catch; the f32 form still runs the CPU's arithmetic
// and must be bit-identical. Batch invariance (a row alone, chunked, or inside calls of other sizes) is exact
// on the CUDA backend. Skips where create_backend("cuda") fails. The flash attention:
// cuda_contract_attention_test.cpp; the other ops: cuda_contract_test.cpp.
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
// default; 1: sums in registers, 128 x 64 blocks; 2..: the swizzled candidates of linear_tc_large.cu, 10 the
// wgmma form of linear_tc_wgmma_sm90a.cu) are
// a speed choice only: the same rows in f32 and bf16, bit for bit, as config 0, and equal to the
// small-row kernel's rows. The shapes reach every edge of the candidates: rows not a multiple of any
// block (129, 257, 300, 777), out_f odd (131: single stores) and not a multiple of 64, in_f below one
// chunk (200: one partial k tile), not a multiple of 64 or 16 (1000: a partial tile ending in a
// zero-padded 16-step), twelve chunks with a partial one (3000), odd (1001: no 16-byte copies, so the
// candidates fall back to config 0), and bias or none; two whole chunks (512) and one whole chunk and a
// partial one (320) for the wgmma candidates that alternate accumulator sets by chunk.
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
                       Case{1000, 3000, 520, false}, Case{300, 512, 200, true}, Case{257, 320, 136, false}}) {
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

}  // namespace
