// The Gated DeltaNet ops of one linear-attention layer on the real Qwen3.5 shapes: the delta rule
// (chunked entry over a prompt in one call, and in 64-token calls as prefill runs where the prompt
// cache keeps block states; the recurrent entry for one decode token) and the causal conv1d, bf16
// activations. Only the public Backend API is used, so this file builds unchanged against an older
// tree (copy it and gdn_bench_util.h there, add the two CMake lines) and old and new kernels can be
// timed in one device call.
//   gdn_bench [--backend cuda|cpu] [--tokens N] [--reps R]      (defaults: cuda, 1800, 20)
// Each figure: the median over R calls of (launch + synchronize), after one warm-up call; the one-token rows,
// where the backend records graphs, the mean over 5 replays of a graph of 10 R calls (gdn_bench_util.h
// replay_ms: without it their ≈ 10 µs of launch and synchronisation hid the kernels); the bound
// beside it is the call's bytes (q, k, v, g, beta, out read/written once, the f32 state read and written
// once) at the H200's measured 4.3 TB/s. A page of the 0.8B has 18 such layers, of the 4B 24.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gdn_bench_util.h"

namespace {

using tf::Backend;
using tf::DeviceBuffer;
using tf::DType;
using namespace tf::gdnbench;

void row(const char* what, int64_t n, double ms, double bytes, int64_t layers) {
  const double us = ms * 1e3, bound_us = bytes / kHbm * 1e6;
  std::printf("  %-38s %5lld | %11.1f us | %9.0f tok/s | bound %8.2f us (%5.1f%%) | x %lld layers %9.3f ms\n",
              what, static_cast<long long>(n), us, static_cast<double>(n) / (ms * 1e-3), bound_us,
              100.0 * bound_us / us, static_cast<long long>(layers), ms * static_cast<double>(layers));
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "cuda";
  int64_t n = 1800;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend"))
      backend = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokens"))
      n = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: gdn_bench [--backend cuda|cpu] [--tokens N] [--reps R]\n");
      return 2;
    }
  }
  auto made = tf::create_backend(backend);
  if (!made.ok()) {
    std::fprintf(stderr, "gdn_bench: %s\n", made.error().message.c_str());
    return 1;
  }
  Backend& be = *made.value();
  const DType act = DType::BF16;
  std::printf("gdn_bench: backend %s, bf16 activations, f32 state, %lld prompt tokens, median of %d calls\n",
              backend.c_str(), static_cast<long long>(n), reps);
  for (const Shape& s : kShapes) {
    std::printf("%s: %lld key heads, %lld value heads, dk %lld, dv %lld\n", s.name,
                static_cast<long long>(s.hk), static_cast<long long>(s.hv), static_cast<long long>(s.dk),
                static_cast<long long>(s.dv));
    const DeltaRuleIo io = delta_rule_io(be, act, s, n);
    const DeviceBuffer &q = io.q, &k = io.k, &v = io.v, &g = io.g, &beta = io.beta, &out = io.out;
    DeviceBuffer state = be.alloc(DType::F32, {s.hv, s.dk, s.dv});
    const double state_bytes = 2.0 * 4 * static_cast<double>(s.hv * s.dk * s.dv);
    auto io_bytes = [&](int64_t rows) {
      return static_cast<double>(rows) * (2.0 * s.hk * s.dk * 2 + 2.0 * s.hv * s.dv * 2 + s.hv * (4 + 2));
    };
    auto rows = [&](const DeviceBuffer& b, int64_t r0, int64_t r1) { return b.tensor().slice_rows(r0, r1); };
    auto chunked = [&](int64_t r0, int64_t r1) {
      be.gated_delta_rule_chunked(rows(q, r0, r1), rows(k, r0, r1), rows(v, r0, r1), rows(g, r0, r1),
                                  rows(beta, r0, r1), state, rows(out, r0, r1));
    };
    row("delta rule, chunked, one call", n, time_ms(be, reps, [&] { chunked(0, n); }),
        io_bytes(n) + state_bytes, s.layers);
    const int64_t calls = (n + 63) / 64;
    row("delta rule, chunked, 64-token calls", n,
        time_ms(be, reps,
                [&] {
                  for (int64_t r0 = 0; r0 < n; r0 += 64) chunked(r0, std::min(n, r0 + 64));
                }),
        io_bytes(n) + static_cast<double>(calls) * state_bytes, s.layers);
    row("delta rule, recurrent, 1 decode token", 1,
        replay_ms(be, reps * 10,
                  [&] {
                    be.gated_delta_rule_recurrent(rows(q, 0, 1), rows(k, 0, 1), rows(v, 0, 1), rows(g, 0, 1),
                                                  rows(beta, 0, 1), state, rows(out, 0, 1));
                  }),
        io_bytes(1) + state_bytes, s.layers);
    // The conv over [q | k | v] channels (2 hk dk + hv dv), kernel 4.
    const int64_t C = 2 * s.hk * s.dk + s.hv * s.dv;
    DeviceBuffer x = be.alloc(act, {n, C}), w = be.alloc(act, {C, 4}), win = be.alloc(act, {C, 3}),
                 y = be.alloc(act, {n, C});
    fill(be, x, 6, -1, 1);
    fill(be, w, 7, -1, 1);
    row("causal conv1d + silu, one call", n, time_ms(be, reps, [&] { be.causal_conv1d_silu(x, w, win, y); }),
        static_cast<double>(n) * C * 2 * 2 + C * (4 + 3 * 2) * 2.0, s.layers);
    row("causal conv1d + silu, 1 decode token", 1,
        replay_ms(be, reps * 10, [&] { be.causal_conv1d_silu(rows(x, 0, 1), w, win, rows(y, 0, 1)); }),
        C * 2 * 2.0 + C * (4 + 3 * 2) * 2.0, s.layers);
  }
  return 0;
}
