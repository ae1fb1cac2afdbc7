// The decode step's op chains (backend/ops.h rms_norm_linear, rms_norm_linear_glu, linear_add) against the
// ops they chain, run one by one: bit for bit on the CPU (Backend's definitions) and on CUDA, where calls of
// <= 16 bf16 rows run as one kernel (backend/cuda/linear_tc_small.cuh) and larger ones as the ops in turn.
// That the fused kernel ran is checked too: it leaves the scratch tensors (xn, gu, y) unwritten, the ops in
// turn write them. Planted control: the fused call under 128-wide k chunks must differ from the ops in turn
// at 256.
#include <cstring>

#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kBF16 = DType::BF16;

bool all_zero(const Buffer& b) {
  const auto* p = static_cast<const unsigned char*>(b.data());
  for (size_t i = 0; i < b.nbytes(); ++i)
    if (p[i]) return false;
  return true;
}

struct Outs {
  std::vector<Buffer> out;  // the op's outputs (linear_add: h after)
  Buffer scratch;           // xn (norm forms) or y (linear_add) after the call
};

// rms_norm_linear over weights ws (fused: the op; else rms_norm then linear_many).
Outs norm_linear(Backend& be, const Buffer& h, const Buffer& nw, RmsNormKind kind,
                 const std::vector<Buffer>& ws, bool fused) {
  const int64_t n = h.shape()[0], in_f = h.shape()[1];
  auto dh = upload_new(be, h), dnw = upload_new(be, nw);
  auto xn = be.alloc(kBF16, {n, in_f});
  std::vector<DeviceBuffer> dws, douts;
  std::vector<Tensor> wt, ot;
  for (const Buffer& w : ws) {
    dws.push_back(upload_new(be, w));
    wt.push_back(dws.back().tensor());
    douts.push_back(be.alloc(kBF16, {n, w.shape()[0]}));
    ot.push_back(douts.back().tensor());
  }
  if (fused) {
    be.rms_norm_linear(dh, dnw, 1e-6f, kind, xn, wt, ot);
  } else {
    be.rms_norm(dh, dnw, 1e-6f, kind, xn);
    be.linear_many(xn, wt, ot);
  }
  Outs r;
  for (const DeviceBuffer& o : douts) r.out.push_back(fetch(be, o));
  r.scratch = fetch(be, xn);
  return r;
}

Outs norm_glu(Backend& be, const Buffer& h, const Buffer& nw, RmsNormKind kind, const Buffer& gate_up,
              bool fused) {
  const int64_t n = h.shape()[0], in_f = h.shape()[1], d = gate_up.shape()[0] / 2;
  auto dh = upload_new(be, h), dnw = upload_new(be, nw), dgu_w = upload_new(be, gate_up);
  auto xn = be.alloc(kBF16, {n, in_f});
  auto gu = be.alloc(kBF16, {n, 2 * d}), out = be.alloc(kBF16, {n, d});
  if (fused) {
    be.rms_norm_linear_glu(dh, dnw, 1e-6f, kind, xn, dgu_w, gu, ActKind::kSilu, out);
  } else {
    be.rms_norm(dh, dnw, 1e-6f, kind, xn);
    be.linear(xn, dgu_w, nullptr, gu);
    be.glu(gu, ActKind::kSilu, out);
  }
  Outs r;
  r.out.push_back(fetch(be, out));
  r.scratch = fetch(be, xn);
  return r;
}

Outs lin_add(Backend& be, const Buffer& x, const Buffer& w, const Buffer* bias, const Buffer& h, bool fused) {
  const int64_t n = x.shape()[0];
  auto dx = upload_new(be, x), dw = upload_new(be, w), dh = upload_new(be, h);
  DeviceBuffer db;
  if (bias) db = upload_new(be, *bias);
  auto y = be.alloc(kBF16, {n, w.shape()[0]});
  if (fused) {
    be.linear_add(dx, dw, bias ? &db.tensor() : nullptr, y, dh);
  } else {
    be.linear(dx, dw, bias ? &db.tensor() : nullptr, y);
    be.add(dh, y, dh);
  }
  Outs r;
  r.out.push_back(fetch(be, dh));
  r.scratch = fetch(be, y);
  return r;
}

// Every chain on `be` equals its ops in turn, over the 1B's and the 4B's decode shapes (and odd widths) at
// `rows`; expect_fused: the scratch stays unwritten (the one-kernel form ran), else it holds the ops' values.
void expect_chains_equal_ops(Backend& be, const std::vector<int64_t>& rows, bool fused_kernels) {
  uint32_t seed = 4100;
  for (int64_t n : rows) {
    const bool expect_fused = fused_kernels && n <= 16;
    for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight}) {
      const char* kn = kind == RmsNormKind::kWeight ? "w" : "1+w";
      // rms_norm_linear: the 1B's q|k|v (1024 -> 4096) and a Qwen3.5-like in_proj of four odd widths.
      for (const auto& widths : {std::vector<int64_t>{4096}, std::vector<int64_t>{1032, 520, 32, 40}}) {
        const int64_t in_f = widths.size() == 1 ? 1024 : 2560;
        const Buffer h = randn(kBF16, {n, in_f}, seed++, 3.0f),
                     nw = uniform(kBF16, {in_f}, seed++, 0.5f, 1.5f);
        std::vector<Buffer> ws;
        for (int64_t wd : widths) ws.push_back(randn(kBF16, {wd, in_f}, seed++, 0.03f));
        const Outs f = norm_linear(be, h, nw, kind, ws, true), u = norm_linear(be, h, nw, kind, ws, false);
        for (size_t i = 0; i < ws.size(); ++i)
          EXPECT_TRUE(Exact(u.out[i], f.out[i]))
              << cat("rms_norm_linear ", n, " x ", in_f, " ", kn, " out ", i);
        EXPECT_EQ(all_zero(f.scratch), expect_fused) << cat("rms_norm_linear ", n, " rows: xn written?");
      }
      // rms_norm_linear_glu: the 1B's gate|up (1024 -> 2 x 3072), an odd d (2560 -> 2 x 1100), and a k whose
      // last 16-step reaches past in_f (1000: it reads the normalised rows' pad, which must be zero).
      for (const auto& [in_f, d] : {std::pair<int64_t, int64_t>{1024, 3072}, {2560, 1100}, {1000, 600}}) {
        const Buffer h = randn(kBF16, {n, in_f}, seed++, 3.0f),
                     nw = uniform(kBF16, {in_f}, seed++, 0.5f, 1.5f);
        const Buffer gate_up = randn(kBF16, {2 * d, in_f}, seed++, 0.03f);
        const Outs f = norm_glu(be, h, nw, kind, gate_up, true),
                   u = norm_glu(be, h, nw, kind, gate_up, false);
        EXPECT_TRUE(Exact(u.out[0], f.out[0]))
            << cat("rms_norm_linear_glu ", n, " x ", in_f, " d ", d, " ", kn);
        EXPECT_EQ(all_zero(f.scratch), expect_fused) << cat("rms_norm_linear_glu ", n, " rows: xn written?");
      }
    }
    // linear_add: the 1B's o_proj (2048 -> 1024) with a bias, down_proj (3072 -> 1024), an odd width.
    for (const auto& [in_f, out_f] : {std::pair<int64_t, int64_t>{2048, 1024}, {3072, 1024}, {1000, 1001}}) {
      const Buffer x = randn(kBF16, {n, in_f}, seed++), w = randn(kBF16, {out_f, in_f}, seed++, 0.03f);
      const Buffer h = randn(kBF16, {n, out_f}, seed++, 3.0f), bias = randn(kBF16, {out_f}, seed++);
      const Buffer* bp = in_f == 2048 ? &bias : nullptr;
      // Past 16 rows, with TF_CUDA_FUSED_LINEAR bit 16 on, the wgmma linear's own store adds (the large-row
      // form, large_epilogue_test.cpp): y stays unwritten then too.
      const int64_t large0 = test_hooks::cuda_linear_large_fused_calls();
      const Outs f = lin_add(be, x, w, bp, h, true);
      const bool large = test_hooks::cuda_linear_large_fused_calls() > large0;
      const Outs u = lin_add(be, x, w, bp, h, false);
      EXPECT_TRUE(Exact(u.out[0], f.out[0])) << cat("linear_add ", n, " x ", in_f, " -> ", out_f);
      EXPECT_FALSE(large && n <= 16) << cat("linear_add ", n, " rows: the large-row store ran");
      EXPECT_EQ(all_zero(f.scratch), expect_fused || large) << cat("linear_add ", n, " rows: y written?");
    }
  }
}

TEST(FusedLinears, CpuChainsEqualOps) { expect_chains_equal_ops(*make_cpu_backend(), {1, 3}, false); }

// CUDA: the one-kernel forms (1..16 rows) and the ops in turn (17 rows) equal the ops one by one, at the
// device's grid and with 3 blocks walking every column tile; with the fused forms off, the ops in turn run
// (scratch written).
TEST_F(CudaContract, FusedLinears) {
  sweep_fused_forms([&](bool fused, int) {
    expect_chains_equal_ops(dev(), fused ? std::vector<int64_t>{1, 2, 5, 16, 17} : std::vector<int64_t>{1},
                            fused);
  });
}

// Control: the same fused calls under 128-wide k chunks (test_hooks::set_cuda_linear_small_rows_chunk) must
// differ from the ops in turn at the contract's 256 (f32 sums in another order; 16 rows of >= 4096 bf16
// outputs, so some land across a rounding boundary), each chain.
TEST_F(CudaContract, FusedLinearsPlantedControl) {
  struct Restore {
    ~Restore() { test_hooks::set_cuda_linear_small_rows_chunk(0); }
  } restore;
  const Buffer h = randn(kBF16, {16, 2560}, 51, 3.0f), nw = uniform(kBF16, {2560}, 52, 0.5f, 1.5f);
  std::vector<Buffer> ws;
  ws.push_back(randn(kBF16, {4096, 2560}, 53, 0.03f));
  const Buffer gate_up = randn(kBF16, {2 * 4096, 2560}, 54, 0.03f);
  const Buffer x = randn(kBF16, {16, 3072}, 55), w = randn(kBF16, {4096, 3072}, 56, 0.03f);
  const Buffer hr = randn(kBF16, {16, 4096}, 57, 0.1f);
  const Outs a = norm_linear(dev(), h, nw, RmsNormKind::kWeight, ws, false);
  const Outs b = norm_glu(dev(), h, nw, RmsNormKind::kWeight, gate_up, false);
  const Outs c = lin_add(dev(), x, w, nullptr, hr, false);
  ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(128));
  EXPECT_TRUE(Differs(a.out[0], norm_linear(dev(), h, nw, RmsNormKind::kWeight, ws, true).out[0]))
      << "rms_norm_linear with 128-wide chunks: not caught";
  EXPECT_TRUE(Differs(b.out[0], norm_glu(dev(), h, nw, RmsNormKind::kWeight, gate_up, true).out[0]))
      << "rms_norm_linear_glu with 128-wide chunks: not caught";
  EXPECT_TRUE(Differs(c.out[0], lin_add(dev(), x, w, nullptr, hr, true).out[0]))
      << "linear_add with 128-wide chunks: not caught";
}

}  // namespace
