// A decode step's Gated DeltaNet ops over B sequences on the state pool (issue 17): the causal conv and
// the recurrent delta rule run per sequence (2 B launches per layer, the engine before the pool) against
// the *_slots ops over all of them (2 launches per layer), for one decode row per sequence and for draft
// verification (1 + 4 rows per sequence, every row's state kept). Real Qwen3.5 shapes, bf16 activations.
//   gdn_slots_bench [--backend cuda|cpu] [--reps R]      (defaults: cuda, 20)
// Each figure: the median over R steps of (launches + synchronize) after one warm-up, for one layer;
// the bound beside it is the step's state bytes (each sequence's f32 state read and written once) at
// the H200's measured 4.3 TB/s. A step of the 0.8B runs 18 such layers, of the 4B 24.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gdn_bench_util.h"

namespace {

using tf::Backend;
using tf::DeviceBuffer;
using tf::DType;
using tf::Tensor;
using namespace tf::gdnbench;

Tensor slot(const DeviceBuffer& pool, int64_t i) {
  const Tensor& p = pool.tensor();
  tf::Shape rest(p.shape.begin() + 1, p.shape.end());
  return p.slice_rows(i, i + 1).reshaped(std::move(rest));
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cuda";
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend"))
      backend = argv[i + 1];
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: gdn_slots_bench [--backend cuda|cpu] [--reps R]\n");
      return 2;
    }
  }
  auto made = tf::create_backend(backend);
  if (!made.ok()) {
    std::fprintf(stderr, "gdn_slots_bench: %s\n", made.error().message.c_str());
    return 1;
  }
  Backend& be = *made.value();
  const DType act = DType::BF16;
  std::printf(
      "gdn_slots_bench: backend %s, one layer, median of %d steps (us); bound = state bytes at 4.3 TB/s\n",
      backend.c_str(), reps);
  for (const Shape& s : kShapes) {
    std::printf("%s (x %lld layers per step)\n", s.name, static_cast<long long>(s.layers));
    std::printf("  %-6s %4s | %12s %12s | %8s | %9s\n", "rows", "B", "per-seq us", "batched us", "speedup",
                "bound us");
    const int64_t C = 2 * s.hk * s.dk + s.hv * s.dv;
    for (int64_t per : {int64_t{1}, int64_t{5}})
      for (int64_t B : {1, 8, 32, 64, 128}) {
        if (backend == "cpu" && B > 32) continue;
        const int64_t n = B * per;
        const DeltaRuleIo io = delta_rule_io(be, act, s, n);
        const DeviceBuffer &q = io.q, &k = io.k, &v = io.v, &g = io.g, &beta = io.beta, &out = io.out;
        DeviceBuffer x = be.alloc(act, {n, C}), w = be.alloc(act, {C, 4}), y = be.alloc(act, {n, C});
        DeviceBuffer win = be.alloc(act, {B, C, 3}), st = be.alloc(DType::F32, {B, s.hv, s.dk, s.dv});
        DeviceBuffer kwin = be.alloc(act, {n, C, 3}), kst = be.alloc(DType::F32, {n, s.hv, s.dk, s.dv});
        fill(be, x, 6, -1, 1);
        fill(be, w, 7, -1, 1);
        std::vector<int32_t> rows;
        for (int64_t i = 0; i < B; ++i) {  // sequence i in slot B - 1 - i, at position 100 + i
          const int32_t r[6] = {static_cast<int32_t>(i * per),
                                static_cast<int32_t>((i + 1) * per),
                                static_cast<int32_t>(B - 1 - i),
                                static_cast<int32_t>(100 + i),
                                per > 1 ? static_cast<int32_t>(i * per) : -1,
                                1};
          rows.insert(rows.end(), r, r + 6);
        }
        DeviceBuffer segs = be.alloc(DType::I32, {B, 6});
        be.upload(segs, rows.data());
        auto sl = [&](const DeviceBuffer& b, int64_t r0, int64_t r1) {
          return b.tensor().slice_rows(r0, r1);
        };
        const double per_seq = time_ms(be, reps, [&] {
          for (int64_t i = 0; i < B; ++i)
            for (int64_t r = i * per; r < (i + 1) * per;
                 ++r) {  // draft rows one at a time, kept (the old path)
              be.causal_conv1d_silu(sl(x, r, r + 1), w, slot(win, B - 1 - i), sl(y, r, r + 1));
              be.gated_delta_rule_recurrent(sl(q, r, r + 1), sl(k, r, r + 1), sl(v, r, r + 1),
                                            sl(g, r, r + 1), sl(beta, r, r + 1), slot(st, B - 1 - i),
                                            sl(out, r, r + 1));
              if (per > 1) {
                be.copy(slot(win, B - 1 - i), slot(kwin, r));
                be.copy(slot(st, B - 1 - i), slot(kst, r));
              }
            }
        });
        const Tensor* kw = per > 1 ? &kwin.tensor() : nullptr;
        const Tensor* ks = per > 1 ? &kst.tensor() : nullptr;
        const double batched = time_ms(be, reps, [&] {
          const Tensor yt = y;
          be.causal_conv1d_silu_slots(x, w, win, segs, std::span<const Tensor>(&yt, 1), kw);
          be.gated_delta_rule_recurrent_slots(q, k, v, g, beta, st, segs, out, ks);
        });
        const double bytes =
            static_cast<double>(B) * 2.0 * 4 * static_cast<double>(s.hv * s.dk * s.dv) +
            (per > 1 ? static_cast<double>(n) * 4 * static_cast<double>(s.hv * s.dk * s.dv) : 0);
        std::printf("  %-6s %4lld | %12.1f %12.1f | %7.1fx | %9.2f\n", per > 1 ? "1+4" : "1",
                    static_cast<long long>(B), per_seq * 1e3, batched * 1e3, per_seq / batched,
                    bytes / kHbm * 1e6);
      }
  }
  return 0;
}
