// The configurations of the tensor-core linear for <= 64 rows (backend/cuda/linear_tc.cu's chunks kernel and
// the candidates of backend/cuda/linear_tc_small.cu, picked by test_hooks::set_cuda_linear_small_config) give
// the same bits as each other and as the tiled kernels of larger calls. The tolerance against the CPU and the
// invariance of the default configuration: cuda_contract_tc_test.cpp. Skips where create_backend("cuda")
// fails.
#include <cstdint>
#include <cstdio>
#include <string>

#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};
constexpr DType kBF16 = DType::BF16;

// out in `out_dt` (bf16 x and w: the tensor-core linear).
Buffer run_linear(Backend& be, const Buffer& x, const Buffer& w, const Buffer* bias, DType out_dt) {
  auto dx = upload_new(be, x), dw = upload_new(be, w);
  DeviceBuffer db;
  if (bias) db = upload_new(be, *bias);
  auto out = be.alloc(out_dt, {x.shape()[0], w.shape()[0]});
  be.linear(dx, dw, bias ? &db.tensor() : nullptr, out);
  return fetch(be, out);
}

// The configurations for <= 64 rows (0: the chunks kernel of linear_tc.cu; 1..: the candidates of
// linear_tc_small.cu, test_hooks::set_cuda_linear_small_config) are a speed choice only: calls of 1, 2, 7,
// 16, 17, 33 and 64 rows under each give the bits of the same rows of one 256-row call (the tiled kernels),
// in f32 and bf16, with the grid at the device's resident blocks and capped at 3 (blocks walking many column
// tiles; test_hooks::set_cuda_linear_small_grid_cap). Shapes as above plus the 1B's decode shapes (stacked
// q|k|v, down); bias or none. Control: with the planted 128-wide chunks, each configuration's 1-row call must
// differ (f32 out). The split form (which production runs from 17 rows where it applies) is off here, so the
// 17..64-row calls run these configurations; BatchInvarianceLinearSplit below checks it.
TEST_F(CudaContract, BatchInvarianceLinearSmallConfigs) {
  struct Restore {
    bool off = test_hooks::set_cuda_linear_split_min_rows(257);
    ~Restore() {
      test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default());
      test_hooks::set_cuda_linear_small_config(test_hooks::cuda_linear_small_default());
      test_hooks::set_cuda_linear_small_rows_chunk(0);
      test_hooks::set_cuda_linear_small_grid_cap(0);
    }
  } restore;
  const int n_cfg = test_hooks::cuda_linear_small_configs();
  ASSERT_GE(n_cfg, 2);
  struct Case {
    int64_t in_f, out_f;
    bool bias;
  };
  uint32_t seed = 120;
  for (const Case c :
       {Case{200, 72, true}, Case{1000, 130, false}, Case{3000, 520, true}, Case{1001, 4300, true},
        Case{2056, 4240, false}, Case{1024, 4096, false}, Case{3072, 1024, true}, Case{2560, 8200, true}}) {
    Buffer x = randn(kBF16, {256, c.in_f}, seed++), w = randn(kBF16, {c.out_f, c.in_f}, seed++, 0.03f),
           b = randn(kBF16, {c.out_f}, seed++);
    const Buffer* bp = c.bias ? &b : nullptr;
    for (DType out_dt : kActs) {
      const std::string what =
          cat("linear ", c.in_f, "->", c.out_f, c.bias ? " +bias" : "", " out ", dtype_name(out_dt));
      const Buffer full = run_linear(dev(), x, w, bp, out_dt);
      for (int cfg = 0; cfg < n_cfg; ++cfg) {
        ASSERT_TRUE(test_hooks::set_cuda_linear_small_config(cfg));
        int bad = 0;
        // Grid caps: the device's resident blocks (0), then 3 blocks walking every tile of the call.
        for (int cap : {0, 3}) {
          ASSERT_TRUE(test_hooks::set_cuda_linear_small_grid_cap(cap));
          for (int64_t rows : {1, 2, 7, 16, 17, 33, 64}) {
            const int64_t r0 = (rows * 37) % (256 - rows);
            const Diff d = diff(rows_of(full, r0, r0 + rows),
                                run_linear(dev(), rows_of(x, r0, r0 + rows), w, bp, out_dt));
            if (d.error.empty() && d.differ == 0) continue;
            ++bad;
            ADD_FAILURE() << what << ": config " << cfg << " ("
                          << test_hooks::cuda_linear_small_config_name(cfg) << "), grid cap " << cap << ", "
                          << rows << " rows at row " << r0 << ": " << d.str();
          }
        }
        ASSERT_TRUE(test_hooks::set_cuda_linear_small_grid_cap(0));
        std::printf("[ contract ] %s: small config %d (%s): %s\n", what.c_str(), cfg,
                    test_hooks::cuda_linear_small_config_name(cfg),
                    bad ? "DIFFERS" : "7 row counts x 2 grid caps bit-identical");
        if (out_dt != DType::F32) continue;
        ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(128));
        EXPECT_TRUE(Differs(rows_of(full, 5, 6), run_linear(dev(), rows_of(x, 5, 6), w, bp, out_dt)))
            << what << ": config " << cfg << " with chunks of 128: control not caught";
        ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(0));
      }
      ASSERT_TRUE(test_hooks::set_cuda_linear_small_config(test_hooks::cuda_linear_small_default()));
    }
  }
}

}  // namespace

namespace {

// linear_many (a layer's projections of one input in one launch, backend/cuda/linear_tc_small.cu's column
// segments) gives each output the bits of its separate linear call: calls of 1, 7, 16, 33, 64 (one launch)
// and 65 rows (separate launches), four weights of odd and even widths (Qwen3.5's in_proj qkv | z | b | a
// shape at 2560 wide, scaled), with the device's grid and a 3-block cap (the split form off, as above).
// Control: the outputs handed over in another order (w[1]'s output where w[0]'s belongs) must differ.
TEST_F(CudaContract, LinearManyEqualsSeparateLinears) {
  struct Restore {
    bool off = test_hooks::set_cuda_linear_split_min_rows(257);
    ~Restore() {
      test_hooks::set_cuda_linear_small_grid_cap(0);
      test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default());
    }
  } restore;
  constexpr int64_t kIn = 2560;
  const int64_t widths[] = {1032, 520, 32, 40};
  uint32_t seed = 700;
  std::vector<Buffer> ws;
  for (int64_t wd : widths) ws.push_back(randn(kBF16, {wd, kIn}, seed++, 0.03f));
  const Buffer x = randn(kBF16, {65, kIn}, seed++);
  Backend& be = dev();
  std::vector<DeviceBuffer> dws;
  std::vector<Tensor> wt;
  for (const Buffer& w : ws) dws.push_back(upload_new(be, w));
  for (const DeviceBuffer& d : dws) wt.push_back(d.tensor());
  for (int cap : {0, 3}) {
    ASSERT_TRUE(test_hooks::set_cuda_linear_small_grid_cap(cap));
    for (int64_t rows : {1, 7, 16, 33, 64, 65}) {
      const Buffer xr = rows_of(x, 0, rows);
      auto dx = upload_new(be, xr);
      std::vector<DeviceBuffer> outs;
      std::vector<Tensor> ot;
      for (int64_t wd : widths) outs.push_back(be.alloc(kBF16, {rows, wd}));
      for (const DeviceBuffer& o : outs) ot.push_back(o.tensor());
      be.linear_many(dx, wt, ot);
      int bad = 0;
      for (size_t i = 0; i < ws.size(); ++i) {
        const Diff d = diff(run_linear(be, xr, ws[i], nullptr, kBF16), fetch(be, outs[i]));
        if (d.error.empty() && d.differ == 0) continue;
        ++bad;
        ADD_FAILURE() << "linear_many, grid cap " << cap << ", " << rows << " rows, output " << i << ": "
                      << d.str();
      }
      std::printf("[ contract ] linear_many 2560 -> 1032 | 520 | 32 | 40, %lld rows, grid cap %d: %s\n",
                  static_cast<long long>(rows), cap, bad ? "DIFFERS" : "each output bit-identical");
    }
  }
  // Control: outputs 0 and 1 swapped in width-compatible order is impossible (shapes differ), so run w[1]
  // into a buffer compared against w[0]'s separate call over the first 520 columns.
  auto dx = upload_new(be, rows_of(x, 0, 1));
  auto o = be.alloc(kBF16, {1, widths[1]});
  const Tensor w1[] = {wt[1]}, o1[] = {o.tensor()};
  be.linear_many(dx, w1, o1);
  const Buffer sep0 = run_linear(be, rows_of(x, 0, 1), rows_of(ws[0], 0, widths[1]), nullptr, kBF16);
  EXPECT_TRUE(Differs(sep0, fetch(be, o))) << "linear_many control: another weight's output not caught";
}

}  // namespace

namespace {

// The split form (backend/cuda/linear_split.cu: one block per (tile, k chunk), partials folded in chunk
// order) gives the bits of the unsplit kernels: calls of 17 .. 256 rows at odd offsets with the split on (the
// production rule) and off, f32 and bf16 out, on the 1B's decode shapes (q|k|v, o, gate|up, down), a partial
// last chunk (1000), one chunk and a partial one (320), odd in_f (1001: element loads), odd out_f, bias or
// none; the partials on the wgmma blocks (the production form on the H200) and on the mma.sync tiles
// (test_hooks::set_cuda_linear_split_mma), with every k of two chunks or more split (production leaves
// k <= 1,024 unsplit: test_hooks::set_cuda_linear_split_min_chunks). The split must have run
// (test_hooks::cuda_linear_split_calls).
// Control: with the planted 128-wide chunks for <= 16 rows, a 16-row call must differ from the 256-row
// call's rows (f32 out).
TEST_F(CudaContract, BatchInvarianceLinearSplit) {
  struct Restore {
    ~Restore() {
      test_hooks::set_cuda_linear_split_mma(false);
      test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default());
      test_hooks::set_cuda_linear_small_rows_chunk(0);
      test_hooks::set_cuda_linear_split_min_chunks(test_hooks::cuda_linear_split_min_chunks_default());
    }
  } restore;
  ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_chunks(2));  // every k of two chunks or more: split
  struct Case {
    int64_t in_f, out_f;
    bool bias;
  };
  uint32_t seed = 800;
  for (const Case c :
       {Case{1024, 4096, false}, Case{2048, 1024, true}, Case{1024, 6144, false}, Case{3072, 1024, false},
        Case{1000, 130, true}, Case{320, 72, false}, Case{1001, 520, true}}) {
    Buffer x = randn(kBF16, {256, c.in_f}, seed++), w = randn(kBF16, {c.out_f, c.in_f}, seed++, 0.03f),
           b = randn(kBF16, {c.out_f}, seed++);
    const Buffer* bp = c.bias ? &b : nullptr;
    for (int form = 0; form < 2; ++form)
      for (DType out_dt : kActs) {
        ASSERT_TRUE(test_hooks::set_cuda_linear_split_mma(form == 1));
        const std::string what = cat("linear ", c.in_f, "->", c.out_f, c.bias ? " +bias" : "", " out ",
                                     dtype_name(out_dt), form ? " (mma.sync partials)" : "");
        int bad = 0;
        const int64_t before = test_hooks::cuda_linear_split_calls();
        for (int64_t rows : {17, 33, 64, 65, 100, 128, 129, 200, 256}) {
          const int64_t r0 = rows == 256 ? 0 : (rows * 37) % (256 - rows);
          const Buffer xr = rows_of(x, r0, r0 + rows);
          ASSERT_TRUE(test_hooks::set_cuda_linear_split_min_rows(257));
          const Buffer plain = run_linear(dev(), xr, w, bp, out_dt);
          ASSERT_TRUE(
              test_hooks::set_cuda_linear_split_min_rows(test_hooks::cuda_linear_split_min_rows_default()));
          const Diff d = diff(plain, run_linear(dev(), xr, w, bp, out_dt));
          if (d.error.empty() && d.differ == 0) continue;
          ++bad;
          ADD_FAILURE() << what << ": " << rows << " rows at row " << r0
                        << ", split against unsplit: " << d.str();
        }
        const int64_t split_calls = test_hooks::cuda_linear_split_calls() - before;
        EXPECT_GT(split_calls, 0) << what << ": the split form never ran";
        std::printf("[ contract ] %s: %lld split calls of 17..256 rows: %s\n", what.c_str(),
                    static_cast<long long>(split_calls),
                    bad ? "DIFFER" : "bit-identical to the unsplit kernels");
      }
    ASSERT_TRUE(test_hooks::set_cuda_linear_split_mma(false));
    ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(128));
    const Buffer full = run_linear(dev(), x, w, bp, DType::F32);
    EXPECT_TRUE(Differs(rows_of(full, 3, 19), run_linear(dev(), rows_of(x, 3, 19), w, bp, DType::F32)))
        << "linear " << c.in_f << "->" << c.out_f << ": 16 rows with chunks of 128 not caught";
    ASSERT_TRUE(test_hooks::set_cuda_linear_small_rows_chunk(0));
  }
}

}  // namespace
