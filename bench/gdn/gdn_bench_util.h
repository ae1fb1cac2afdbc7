// Shared by the Gated DeltaNet benches (gdn_bench.cpp, gdn_slots_bench.cpp): the Qwen3.5 shapes,
// deterministic inputs and the timer. Public Backend API only.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/ops.h"

namespace tf::gdnbench {

constexpr double kHbm = 4.3e12;  // bytes/s, measured device-to-device on the H200

struct Shape {
  const char* name;
  int64_t hk, hv, dk, dv, layers;  // layers: linear-attention layers per forward
};
constexpr Shape kShapes[] = {{"qwen3.5-0.8b", 16, 16, 128, 128, 18}, {"qwen3.5-4b", 16, 32, 128, 128, 24}};

// Deterministic values in [lo, hi) (bf16 or f32 by the buffer's dtype).
inline void fill(Backend& be, const DeviceBuffer& d, uint32_t seed, float lo, float hi) {
  const Tensor& t = d.tensor();
  Buffer h(t.dtype, t.shape);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < h.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    store_f32(h.view(), i, lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f);
  }
  be.upload(t, h.data());
}

// The delta rule's inputs over n rows, filled (q, k, v in [-1, 1), g and beta in their ranges), and
// its output.
struct DeltaRuleIo {
  DeviceBuffer q, k;  // [n, hk, dk] act
  DeviceBuffer v;     // [n, hv, dv] act
  DeviceBuffer g;     // [n, hv] f32
  DeviceBuffer beta;  // [n, hv] act
  DeviceBuffer out;   // [n, hv, dv] act
};

inline DeltaRuleIo delta_rule_io(Backend& be, DType act, const Shape& s, int64_t n) {
  DeltaRuleIo io{be.alloc(act, {n, s.hk, s.dk}), be.alloc(act, {n, s.hk, s.dk}),
                 be.alloc(act, {n, s.hv, s.dv}), be.alloc(DType::F32, {n, s.hv}),
                 be.alloc(act, {n, s.hv}),       be.alloc(act, {n, s.hv, s.dv})};
  fill(be, io.q, 1, -1, 1);
  fill(be, io.k, 2, -1, 1);
  fill(be, io.v, 3, -1, 1);
  fill(be, io.g, 4, -0.5f, -0.001f);
  fill(be, io.beta, 5, 0, 1);
  return io;
}

// Median milliseconds of run() + synchronize over reps calls, after one warm-up.
inline double time_ms(Backend& be, int reps, const std::function<void()>& run) {
  run();
  be.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    be.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Milliseconds per call of run() where the backend records graphs: `reps` calls captured into one graph, the
// graph replayed once to warm up, then timed over 5 replays (a one-token call's launch and synchronisation
// would otherwise dominate it, as the CUDA events of attention_bench avoid too); elsewhere time_ms.
inline double replay_ms(Backend& be, int reps, const std::function<void()>& run) {
  if (!be.can_capture()) return time_ms(be, reps, run);
  run();
  be.synchronize();
  be.begin_capture();
  for (int r = 0; r < reps; ++r) run();
  const std::unique_ptr<Backend::Graph> g = be.end_capture();
  be.replay(*g);
  be.synchronize();
  constexpr int kReplays = 5;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReplays; ++i) be.replay(*g);
  be.synchronize();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return ms / (kReplays * reps);
}

}  // namespace tf::gdnbench
