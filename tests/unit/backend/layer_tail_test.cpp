// Backend::layer_tail (o_proj into the residual stream, the MLP's norm, gate|up and glu, down_proj into the
// stream) against the three chains run one by one: bit for bit on the CPU (Backend's definition) and on CUDA,
// where calls of <= 4 rows of the shapes it takes run as one kernel (backend/cuda/layer_tail.cu) and the
// others as the chains in turn. Which ran is checked too (test_hooks::cuda_layer_tail_launches). Planted
// control: the kernel under 128-wide k chunks must differ from the chains at 256.
#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kBF16 = DType::BF16;

// One layer's tail weights and inputs: x [n, o_in], h [n, d], o_proj [d, o_in] (+ bias), the norm weight
// [d], gate_up [2 i, d], down [d, i].
struct TailCase {
  Buffer x, h, o_w, o_bias, norm_w, gate_up, down;
  bool bias = false;
  RmsNormKind kind = RmsNormKind::kWeight;
};

TailCase make_case(int64_t n, int64_t o_in, int64_t d, int64_t inter, bool bias, RmsNormKind kind,
                   uint32_t seed, float h_scale = 3.0f) {
  TailCase c;
  c.x = randn(kBF16, {n, o_in}, seed++);
  c.h = randn(kBF16, {n, d}, seed++, h_scale);
  c.o_w = randn(kBF16, {d, o_in}, seed++, 0.03f);
  c.o_bias = randn(kBF16, {d}, seed++);
  c.norm_w = uniform(kBF16, {d}, seed++, 0.5f, 1.5f);
  c.gate_up = randn(kBF16, {2 * inter, d}, seed++, 0.03f);
  c.down = randn(kBF16, {d, inter}, seed++, 0.03f);
  c.bias = bias;
  c.kind = kind;
  return c;
}

struct TailOut {
  Buffer h, mid;
  bool kernel = false;  // layer_tail.cu's kernel ran
};

// layer_tail on `be` (fused: the op; else the three chains, each as Backend defines it: its ops in turn).
TailOut run_tail(Backend& be, const TailCase& c, bool fused) {
  const int64_t n = c.x.shape()[0], d = c.h.shape()[1], inter = c.down.shape()[1];
  auto dx = upload_new(be, c.x), dh = upload_new(be, c.h), dow = upload_new(be, c.o_w),
       dob = upload_new(be, c.o_bias), dnw = upload_new(be, c.norm_w), dgu = upload_new(be, c.gate_up),
       ddown = upload_new(be, c.down);
  auto y = be.alloc(kBF16, {n, d}), xn = be.alloc(kBF16, {n, d}), gu = be.alloc(kBF16, {n, 2 * inter}),
       mid = be.alloc(kBF16, {n, inter});
  const Tensor* bias = c.bias ? &dob.tensor() : nullptr;
  const Backend::TailWeights t{dow, bias, dnw, 1e-6f, c.kind, dgu, ActKind::kSilu, ddown};
  const Backend::TailScratch s{y, xn, gu, mid};
  const int64_t launches = test_hooks::cuda_layer_tail_launches();
  if (fused) {
    be.layer_tail(dx, t, s, dh);
  } else {
    be.Backend::linear_add(dx, dow, bias, y, dh);
    be.Backend::rms_norm_linear_glu(dh, dnw, 1e-6f, c.kind, xn, dgu, gu, ActKind::kSilu, mid);
    be.Backend::linear_add(mid, ddown, nullptr, y, dh);
  }
  TailOut r;
  r.h = fetch(be, dh);
  r.mid = fetch(be, mid);
  r.kernel = test_hooks::cuda_layer_tail_launches() > launches;
  return r;
}

// The 1B's shapes (o 2048 -> 1024, MLP 1024 -> 3072), Qwen3.5-0.8B's (o 2048 -> 1024, MLP 1024 -> 3584), and
// one the kernel does not take (d = 1000: not a multiple of the 256-wide chunks), at every row count in
// `rows`, both norm kinds, with and without the o_proj bias. expect_kernel: calls of <= 4 rows of the first
// two shapes ran as one kernel.
void expect_tail_equals_chains(Backend& be, const std::vector<int64_t>& rows, bool expect_kernel) {
  struct Dims {
    int64_t o_in, d, inter;
    bool takes;
  };
  uint32_t seed = 7100;
  for (int64_t n : rows)
    for (const Dims& dm :
         {Dims{2048, 1024, 3072, true}, Dims{2048, 1024, 3584, true}, Dims{512, 1000, 600, false}})
      for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight})
        for (bool bias : {true, false}) {
          const TailCase c = make_case(n, dm.o_in, dm.d, dm.inter, bias, kind, seed);
          seed += 10;
          const TailOut f = run_tail(be, c, true), u = run_tail(be, c, false);
          const std::string what = cat("layer_tail ", n, " rows, ", dm.o_in, " -> ", dm.d, " -> ", dm.inter,
                                       kind == RmsNormKind::kWeight ? " w" : " 1+w", bias ? " bias" : "");
          EXPECT_TRUE(Exact(u.h, f.h)) << what << ": h";
          EXPECT_TRUE(Exact(u.mid, f.mid)) << what << ": mid";
          EXPECT_EQ(f.kernel, expect_kernel && dm.takes && n <= 4) << what << ": the kernel ran?";
          EXPECT_FALSE(u.kernel) << what;
        }
}

TEST(LayerTail, CpuEqualsChains) { expect_tail_equals_chains(*make_cpu_backend(), {1, 3}, false); }

// CUDA: the kernel (1..4 rows) and the chains in turn (5 rows; the odd shape) equal the chains one by one,
// at the device's grid and with 3 blocks walking every tile (each block's weight stream then crosses many
// tiles and all three phases); with the fused forms off, the chains run.
TEST_F(CudaContract, LayerTail) {
  sweep_fused_forms([&](bool fused, int cap) {
    const std::vector<int64_t> rows = !fused ? std::vector<int64_t>{1}
                                      : cap  ? std::vector<int64_t>{1, 4}
                                             : std::vector<int64_t>{1, 2, 3, 4, 5};
    expect_tail_equals_chains(dev(), rows, fused);
  });
}

// Control: the kernel under 128-wide k chunks (test_hooks::set_cuda_linear_small_rows_chunk) must differ from
// the chains at the contract's 256 (4 rows of the 1B's shapes: 4 x 3072 glu outputs and 4 x 1024 of h, whose
// residual is small so that the projection's last bits reach it).
TEST_F(CudaContract, LayerTailPlantedControl) {
  struct Restore {
    ~Restore() { test_hooks::set_cuda_linear_small_rows_chunk(0); }
  } restore;
  const TailCase c = make_case(4, 2048, 1024, 3072, false, RmsNormKind::kWeight, 77, 0.05f);
  const TailOut u = run_tail(dev(), c, false);
  ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(128));
  const TailOut f = run_tail(dev(), c, true);
  EXPECT_TRUE(f.kernel) << "the kernel did not run";
  EXPECT_TRUE(Differs(u.mid, f.mid)) << "layer_tail with 128-wide chunks: mid not caught";
  EXPECT_TRUE(Differs(u.h, f.h)) << "layer_tail with 128-wide chunks: h not caught";
}

}  // namespace
