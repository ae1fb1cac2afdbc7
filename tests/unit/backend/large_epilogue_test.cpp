// The large-row fused stores (TF_CUDA_FUSED_LINEAR bit 16, backend/cuda/linear_tc_wgmma_sm90a.cu top):
// Backend::linear_add and the linear + glu of Backend::rms_norm_linear_glu for calls of >= 17 rows as the
// wgmma linear with the add or the glu in its store, and Backend::linear_qkv_prep (the vision tower's q/k/v
// projection and RoPE) with q, k, v rotated in its store, bit for bit the ops in turn; Backend::layer_tail of
// many rows both with the stores and without them (o_proj, add_rms_norm, gate|up, glu, down + add). Which
// form ran is asserted (test_hooks::cuda_linear_large_fused_calls). Control: the stores without their
// intermediate rounding (test_hooks::set_cuda_linear_large_fused_planted) must differ from the ops in turn.
#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kBF16 = DType::BF16;

// Restores the production settings whatever fails: the split form's rows, the fused forms, no plant.
struct RestoreForms {
  ~RestoreForms() {
    test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default());
    test_hooks::set_cuda_fused_linear(true);
    test_hooks::set_cuda_linear_large_fused_planted(false);
  }
};

struct Outcome {
  Buffer out;
  bool fused = false;  // the fused store ran
};

// linear_add: h [n, out_f] (scale h_scale) += x [n, in_f] · w^T (+ bias), by the op (fused: the backend's
// override) or by Backend's definition (linear, then add).
Outcome run_linear_add(Backend& be, int64_t n, int64_t in_f, int64_t out_f, bool bias, bool fused,
                       uint32_t seed, float h_scale = 3.0f) {
  const Buffer x = randn(kBF16, {n, in_f}, seed), h = randn(kBF16, {n, out_f}, seed + 1, h_scale),
               w = randn(kBF16, {out_f, in_f}, seed + 2, 0.03f), b = randn(kBF16, {out_f}, seed + 3);
  auto dx = upload_new(be, x), dh = upload_new(be, h), dw = upload_new(be, w), db = upload_new(be, b);
  auto y = be.alloc(kBF16, {n, out_f});
  const Tensor* bp = bias ? &db.tensor() : nullptr;
  const int64_t calls = test_hooks::cuda_linear_large_fused_calls();
  fused ? be.linear_add(dx, dw, bp, y, dh) : be.Backend::linear_add(dx, dw, bp, y, dh);
  return {fetch(be, dh), test_hooks::cuda_linear_large_fused_calls() > calls};
}

// rms_norm_linear_glu: mid [n, d] = glu(rms_norm(x [n, in_f]) · gate_up^T), gate_up [2 d, in_f].
Outcome run_norm_glu(Backend& be, int64_t n, int64_t in_f, int64_t d, bool fused, uint32_t seed) {
  const Buffer x = randn(kBF16, {n, in_f}, seed), nw = uniform(kBF16, {in_f}, seed + 1, 0.5f, 1.5f),
               gu_w = randn(kBF16, {2 * d, in_f}, seed + 2, 0.03f);
  auto dx = upload_new(be, x), dnw = upload_new(be, nw), dgu = upload_new(be, gu_w);
  auto xn = be.alloc(kBF16, {n, in_f}), gu = be.alloc(kBF16, {n, 2 * d}), mid = be.alloc(kBF16, {n, d});
  const int64_t calls = test_hooks::cuda_linear_large_fused_calls();
  fused ? be.rms_norm_linear_glu(dx, dnw, 1e-6f, RmsNormKind::kWeight, xn, dgu, gu, ActKind::kSilu, mid)
        : be.Backend::rms_norm_linear_glu(dx, dnw, 1e-6f, RmsNormKind::kWeight, xn, dgu, gu, ActKind::kSilu,
                                          mid);
  return {fetch(be, mid), test_hooks::cuda_linear_large_fused_calls() > calls};
}

struct Dims {
  int64_t in_f, out_f;
};
// The 1B's o_proj / down and the vision tower's down; k with a shorter last chunk and a partial column tile;
// an odd width (no paired stores).
const Dims kAddDims[] = {{2048, 1024}, {4096, 1024}, {1000, 600}, {512, 1001}};
// The 1B decoder's and vision tower's MLPs (in_f -> d), a partial tile, an odd d.
const Dims kGluDims[] = {{1024, 3072}, {1024, 4096}, {1000, 600}, {512, 301}};
const int64_t kRows[] = {17, 129, 300};

// With the split form off, every call of >= 17 rows runs the fused store.
TEST_F(CudaContract, LargeEpiloguesEqualOpsInTurn) {
  RestoreForms restore;
  ASSERT_TRUE(test_hooks::set_cuda_fused_linear(true));
  ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_rows(257));
  uint32_t seed = 8100;
  for (int64_t n : kRows) {
    for (const Dims& dm : kAddDims)
      for (bool bias : {false, true}) {
        const Outcome f = run_linear_add(dev(), n, dm.in_f, dm.out_f, bias, true, seed),
                      u = run_linear_add(dev(), n, dm.in_f, dm.out_f, bias, false, seed);
        seed += 10;
        const std::string what = cat("linear_add ", n, " x ", dm.in_f, " -> ", dm.out_f, bias ? " bias" : "");
        EXPECT_TRUE(Exact(u.out, f.out)) << what;
        EXPECT_TRUE(f.fused) << what << ": the fused store did not run";
        EXPECT_FALSE(u.fused) << what;
      }
    for (const Dims& dm : kGluDims) {
      const Outcome f = run_norm_glu(dev(), n, dm.in_f, dm.out_f, true, seed),
                    u = run_norm_glu(dev(), n, dm.in_f, dm.out_f, false, seed);
      seed += 10;
      const std::string what = cat("rms_norm_linear_glu ", n, " x ", dm.in_f, " -> ", dm.out_f);
      EXPECT_TRUE(Exact(u.out, f.out)) << what;
      EXPECT_TRUE(f.fused) << what << ": the fused store did not run";
    }
  }
  // Where the split form takes the call (17 rows of o_proj: 16 tiles), the plain ops run: the same bits.
  ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default()));
  const Outcome f = run_linear_add(dev(), 17, 2048, 1024, false, true, 8900),
                u = run_linear_add(dev(), 17, 2048, 1024, false, false, 8900);
  EXPECT_TRUE(Exact(u.out, f.out)) << "linear_add, split form";
  EXPECT_FALSE(f.fused) << "the fused store ran where the split form applies";
}

// layer_tail over many rows (the vision tower's and prefill's): with the fused stores, without them (the
// add_rms_norm form) and Backend's chains one by one, all the same bits.
TEST_F(CudaContract, LargeEpiloguesLayerTail) {
  RestoreForms restore;
  const int64_t n = 300, o_in = 1024, d = 1024, inter = 4096;
  const Buffer x = randn(kBF16, {n, o_in}, 8500), h = randn(kBF16, {n, d}, 8501, 3.0f),
               o_w = randn(kBF16, {d, o_in}, 8502, 0.03f), nw = uniform(kBF16, {d}, 8503, 0.5f, 1.5f),
               gu_w = randn(kBF16, {2 * inter, d}, 8504, 0.03f), down = randn(kBF16, {d, inter}, 8505, 0.03f);
  struct Bits {
    Buffer h, mid;
  };
  auto run = [&](int form) {  // 0 the op with the stores, 1 the op without them, 2 the chains one by one
    EXPECT_TRUE(test_hooks::set_cuda_fused_linear(form != 1));
    Backend& be = dev();
    auto dx = upload_new(be, x), dh = upload_new(be, h), dow = upload_new(be, o_w), dnw = upload_new(be, nw),
         dgu = upload_new(be, gu_w), ddown = upload_new(be, down);
    auto y = be.alloc(kBF16, {n, d}), xn = be.alloc(kBF16, {n, d}), gu = be.alloc(kBF16, {n, 2 * inter}),
         mid = be.alloc(kBF16, {n, inter});
    const Backend::TailWeights t{dow, nullptr, dnw, 1e-5f, RmsNormKind::kWeight, dgu, ActKind::kSilu, ddown};
    const Backend::TailScratch s{y, xn, gu, mid};
    const int64_t calls = test_hooks::cuda_linear_large_fused_calls();
    if (form == 2) {
      be.Backend::linear_add(dx, dow, nullptr, y, dh);
      be.Backend::rms_norm_linear_glu(dh, dnw, 1e-5f, RmsNormKind::kWeight, xn, dgu, gu, ActKind::kSilu, mid);
      be.Backend::linear_add(mid, ddown, nullptr, y, dh);
    } else {
      be.layer_tail(dx, t, s, dh);
    }
    EXPECT_EQ(test_hooks::cuda_linear_large_fused_calls() - calls, form == 0 ? 3 : 0) << "form " << form;
    return Bits{fetch(be, dh), fetch(be, mid)};
  };
  const Bits stores = run(0), plain = run(1), chains = run(2);
  EXPECT_TRUE(Exact(chains.h, stores.h)) << "layer_tail with the fused stores: h";
  EXPECT_TRUE(Exact(chains.mid, stores.mid)) << "layer_tail with the fused stores: mid";
  EXPECT_TRUE(Exact(chains.h, plain.h)) << "layer_tail without them: h";
  EXPECT_TRUE(Exact(chains.mid, plain.mid)) << "layer_tail without them: mid";
}

// linear_qkv_prep: qkv [n, (heads + 2 kv) 64] = x · w^T (+ bias), then qkv_prep without norms (q, k rotated
// by cos / sin [n, 64]); q [n, heads, 64], k, v [n, kv, 64].
struct QkvOut {
  Buffer q, k, v;
  bool fused = false;
};
QkvOut run_qkv(Backend& be, int64_t n, int64_t in_f, int64_t heads, int64_t kv, bool bias, bool fused,
               uint32_t seed) {
  const int64_t width = (heads + 2 * kv) * 64;
  const Buffer x = randn(kBF16, {n, in_f}, seed), w = randn(kBF16, {width, in_f}, seed + 1, 0.03f),
               b = randn(kBF16, {width}, seed + 2), cs = uniform(kBF16, {n, 64}, seed + 3, -1.0f, 1.0f),
               sn = uniform(kBF16, {n, 64}, seed + 4, -1.0f, 1.0f);
  auto dx = upload_new(be, x), dw = upload_new(be, w), db = upload_new(be, b), dc = upload_new(be, cs),
       ds = upload_new(be, sn);
  auto qkv = be.alloc(kBF16, {n, width}), q = be.alloc(kBF16, {n, heads, 64}),
       k = be.alloc(kBF16, {n, kv, 64}), v = be.alloc(kBF16, {n, kv, 64});
  const Tensor* bp = bias ? &db.tensor() : nullptr;
  const int64_t calls = test_hooks::cuda_linear_large_fused_calls();
  fused ? be.linear_qkv_prep(dx, dw, bp, qkv, dc, ds, q, k, v)
        : be.Backend::linear_qkv_prep(dx, dw, bp, qkv, dc, ds, q, k, v);
  QkvOut r{fetch(be, q), fetch(be, k), fetch(be, v)};
  r.fused = test_hooks::cuda_linear_large_fused_calls() > calls;
  return r;
}

// The vision tower's shape (16 heads, in 1024), GQA heads (8 / 2), a k with a shorter last chunk; with and
// without bias, at 17, 129 and 300 rows: the fused store equals linear then qkv_prep, bit for bit.
TEST_F(CudaContract, LargeEpiloguesQkv) {
  RestoreForms restore;
  ASSERT_TRUE(test_hooks::set_cuda_fused_linear(true));
  ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_rows(257));
  struct Heads {
    int64_t in_f, heads, kv;
  };
  uint32_t seed = 8300;
  for (int64_t n : kRows)
    for (const Heads& hd : {Heads{1024, 16, 16}, Heads{512, 8, 2}, Heads{1000, 4, 4}})
      for (bool bias : {false, true}) {
        const QkvOut f = run_qkv(dev(), n, hd.in_f, hd.heads, hd.kv, bias, true, seed),
                     u = run_qkv(dev(), n, hd.in_f, hd.heads, hd.kv, bias, false, seed);
        seed += 10;
        const std::string what = cat("linear_qkv_prep ", n, " x ", hd.in_f, ", ", hd.heads, " / ", hd.kv,
                                     " heads", bias ? " bias" : "");
        EXPECT_TRUE(Exact(u.q, f.q)) << what << ": q";
        EXPECT_TRUE(Exact(u.k, f.k)) << what << ": k";
        EXPECT_TRUE(Exact(u.v, f.v)) << what << ": v";
        EXPECT_TRUE(f.fused) << what << ": the fused store did not run";
        EXPECT_FALSE(u.fused) << what;
      }
}

// Control: without the intermediate rounding (y before the add, gate and up before the glu) the stores must
// differ from the ops in turn (a small residual, so that y's last bits reach h).
TEST_F(CudaContract, LargeEpiloguesPlantedControl) {
  RestoreForms restore;
  ASSERT_TRUE(test_hooks::set_cuda_fused_linear(true));
  ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_rows(257));
  const Outcome ua = run_linear_add(dev(), 129, 2048, 1024, false, false, 8700, 0.05f),
                ug = run_norm_glu(dev(), 129, 1024, 3072, false, 8710);
  const QkvOut uq = run_qkv(dev(), 129, 1024, 16, 16, false, false, 8720);
  ASSERT_TRUE(test_hooks::set_cuda_linear_large_fused_planted(true));
  const Outcome fa = run_linear_add(dev(), 129, 2048, 1024, false, true, 8700, 0.05f),
                fg = run_norm_glu(dev(), 129, 1024, 3072, true, 8710);
  const QkvOut fq = run_qkv(dev(), 129, 1024, 16, 16, false, true, 8720);
  EXPECT_TRUE(fa.fused && fg.fused && fq.fused) << "the fused stores did not run";
  EXPECT_TRUE(Differs(ua.out, fa.out)) << "linear_add without y's rounding: not caught";
  EXPECT_TRUE(Differs(ug.out, fg.out)) << "glu without gate's and up's rounding: not caught";
  EXPECT_TRUE(Differs(uq.q, fq.q)) << "q rotated without rounding qkv first: not caught";
  EXPECT_TRUE(Differs(uq.k, fq.k)) << "k rotated without rounding qkv first: not caught";
}

}  // namespace
