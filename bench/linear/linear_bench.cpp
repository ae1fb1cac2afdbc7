// The bf16 tensor-core linear (src/backend/cuda/linear_tc.cu, linear_tc_small.cu, linear_tc_large.cu) on the
// 1B decoder's shapes as the model runs them (hidden 1024, q|k|v and gate|up stacked at load, 28 layers,
// lm_head 151,936) at 1, 2, 4, 8, 16, 32, 64, 128 and 256 rows: microseconds per call and the weight stream's
// GB/s, with the bound at the device's measured copy bandwidth beside each figure, for every small-row
// configuration of test_hooks::set_cuda_linear_small_config (0 the chunks kernel, 1.. linear_tc_small.cu's
// candidates), and whether each one's output bits equal configuration 0's. Built with -DTF_BENCH=ON where the
// CUDA backend is built; runs on the GPU machine:
//   linear_bench [reps] [--large-only | --small-only] [--configs 0,1,2] [--split-min N] [--split-mma] [--4b]
// (default 200 reps, every config; --split-min: test_hooks::set_cuda_linear_split_min_rows, 257 = the split
// form off; from 17 rows it otherwise preempts the small-row configurations where it applies; --split-mma:
// its partials on the mma.sync tiles instead of the wgmma blocks; --4b: the small-row section on Qwen3.5-4B's
// decode shapes instead of the 1B's)
// The large-row section times every configuration of test_hooks::set_cuda_linear_large_config at the
// prefill and vision shapes and checks each one's output bits against config 0's.
// Per call, two timings with CUDA events over `reps` calls after a warm-up:
//   eager: back-to-back launches from the host (launch gaps included);
//   graph: the same launches captured in one CUDA graph and replayed (as a captured decode step sees it).
// Each timed call reads a different copy of the weights (copies up to ~256 MB in all), so the L2
// (~50 MB) does not serve them, as in a real decode step where 28 layers' weights pass between two
// reads of the same matrix. GB/s counts the weights, x and out once per call. "launch" is a 1 x 8 -> 8
// call: the fixed cost of one launch in a graph.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "../bench_cuda.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/test_hooks.h"

namespace {

using tf::DType;
using tf::Tensor;

struct LinearShape {
  const char* name;
  int64_t in_f, out_f, per_step;  // per_step: calls in one decode step (28 layers; lm_head once)
};

constexpr LinearShape kShapes1b[] = {
    {"qkv_proj", 1024, 4096, 28},  {"o_proj", 2048, 1024, 28},   {"gate_up", 1024, 6144, 28},
    {"down_proj", 3072, 1024, 28}, {"lm_head", 1024, 151936, 1}, {"launch", 8, 8, 0},
};
// --4b: Qwen3.5-4B (hidden 2560, 24 Gated DeltaNet + 8 full-attention layers, tied lm_head 248,320); the
// GDN in_proj (q | k | v | z | b | a, a linear_many call in the model) as one 2,560 -> 12,352 weight, the
// gated attention's q | gate | k | v as one 2,560 -> 10,240.
constexpr LinearShape kShapes4b[] = {
    {"gdn_in", 2560, 12352, 24},  {"gdn_out", 4096, 2560, 24},  {"attn_qkv", 2560, 10240, 8},
    {"attn_o", 4096, 2560, 8},    {"gate_up", 2560, 18432, 32}, {"down_proj", 9216, 2560, 32},
    {"lm_head", 2560, 248320, 1}, {"launch", 8, 8, 0},
};
std::span<const LinearShape> g_shapes = kShapes1b;
constexpr int64_t kRows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
double g_hbm = 4.3e12;  // bytes/s: the device's copy bandwidth, measured at the start (bench_cuda.h)

using tf::bench::dev_alloc;

// Deterministic bf16 values of magnitude 2^-12 .. 2^-4 (like a trained layer's), never NaN or Inf.
void fill(void* dev, int64_t n, uint32_t seed) { tf::bench::fill_bf16(dev, n, seed, 115, 7); }

struct Timing {
  double eager_us, graph_us;
};

Timing time_calls(cudaStream_t s, const std::vector<Tensor>& ws, const Tensor& x, const Tensor& out,
                  int reps) {
  auto launch_all = [&] {
    for (int r = 0; r < reps; ++r)
      tf::cuda::launch_linear(s, x, ws[static_cast<size_t>(r) % ws.size()], nullptr, out);
  };
  for (int r = 0; r < 3; ++r) tf::cuda::launch_linear(s, x, ws[0], nullptr, out);  // warm-up, smem attributes
  TF_CUDA_CHECK(cudaStreamSynchronize(s));
  const float eager_ms = tf::bench::stream_ms(s, launch_all);
  const float graph_ms = tf::bench::graph_replay_ms(s, launch_all);
  return {1e3 * eager_ms / reps, 1e3 * graph_ms / reps};
}

void decode_section(cudaStream_t s, int reps, const std::vector<int>& cfgs) {
  std::printf("small-row configurations (test_hooks::set_cuda_linear_small_config):\n");
  for (int c : cfgs) std::printf("  cfg %d: %s\n", c, tf::test_hooks::cuda_linear_small_config_name(c));
  std::printf("%-10s %5s %6s %7s %3s | %9s %9s | %8s %6s | %8s %5s\n", "shape", "rows", "in_f", "out_f",
              "cfg", "eager us", "graph us", "GB/s", "of HBM", "bound us", "bits");
  const size_t nr = std::size(kRows), nc = cfgs.size();
  std::vector<double> step_graph(nr * nc), step_bound(nr);
  int mismatches = 0;
  for (const LinearShape& sh : g_shapes) {
    const size_t w_bytes = static_cast<size_t>(sh.in_f * sh.out_f) * 2;
    const size_t copies = std::max<size_t>(1, (size_t{256} << 20) / w_bytes);
    std::vector<void*> mem;
    std::vector<Tensor> ws;
    for (size_t c = 0; c < copies; ++c) {
      mem.push_back(dev_alloc(w_bytes));
      fill(mem.back(), sh.in_f * sh.out_f, static_cast<uint32_t>(c + 1));
      ws.push_back(Tensor{mem.back(), DType::BF16, {sh.out_f, sh.in_f}});
    }
    for (size_t ri = 0; ri < nr; ++ri) {
      const int64_t n = kRows[ri];
      void* xm = dev_alloc(static_cast<size_t>(n * sh.in_f) * 2);
      void* om = dev_alloc(static_cast<size_t>(n * sh.out_f) * 2);
      fill(xm, n * sh.in_f, 99);
      const Tensor x{xm, DType::BF16, {n, sh.in_f}}, out{om, DType::BF16, {n, sh.out_f}};
      const double bytes = static_cast<double>(w_bytes) + 2.0 * n * (sh.in_f + sh.out_f);
      const double bound_us = 1e6 * bytes / g_hbm;
      step_bound[ri] += bound_us * static_cast<double>(sh.per_step);
      std::vector<uint16_t> ref(static_cast<size_t>(n * sh.out_f)), got(ref.size());
      for (size_t ci = 0; ci < nc; ++ci) {
        tf::test_hooks::set_cuda_linear_small_config(cfgs[ci]);
        TF_CUDA_CHECK(cudaMemsetAsync(om, 0xff, got.size() * 2, s));
        const Timing t = time_calls(s, ws, x, out, reps);
        TF_CUDA_CHECK(cudaStreamSynchronize(s));
        TF_CUDA_CHECK(
            cudaMemcpy(ci == 0 ? ref.data() : got.data(), om, got.size() * 2, cudaMemcpyDeviceToHost));
        const bool same = ci == 0 || got == ref;
        mismatches += same ? 0 : 1;
        std::printf("%-10s %5lld %6lld %7lld %3d | %9.2f %9.2f | %8.0f %5.0f%% | %8.2f %5s\n", sh.name,
                    static_cast<long long>(n), static_cast<long long>(sh.in_f),
                    static_cast<long long>(sh.out_f), cfgs[ci], t.eager_us, t.graph_us,
                    bytes / (t.graph_us * 1e-6) / 1e9, 100 * bound_us / t.graph_us, bound_us,
                    same ? "same" : "DIFF");
        std::fflush(stdout);
        step_graph[ri * nc + ci] += t.graph_us * static_cast<double>(sh.per_step);
      }
      TF_CUDA_CHECK(cudaFree(xm));
      TF_CUDA_CHECK(cudaFree(om));
    }
    for (void* p : mem) TF_CUDA_CHECK(cudaFree(p));
  }
  tf::test_hooks::set_cuda_linear_small_config(tf::test_hooks::cuda_linear_small_default());
  std::printf("\none decode step's linears (each shape times its calls per step), CUDA graph:\n");
  for (size_t ri = 0; ri < nr; ++ri)
    for (size_t ci = 0; ci < nc; ++ci)
      std::printf("  %2lld rows, cfg %d: %8.1f us, bound %6.1f us (%.0f%% of the bound)\n",
                  static_cast<long long>(kRows[ri]), cfgs[ci], step_graph[ri * nc + ci], step_bound[ri],
                  100 * step_bound[ri] / step_graph[ri * nc + ci]);
  std::printf("small-row configurations whose bits differ from the first listed: %d (must be 0)\n\n",
              mismatches);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  bool large_only = false, small_only = false;
  std::vector<int> cfgs;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--large-only") large_only = true;
    if (arg == "--4b") g_shapes = kShapes4b;
    if (arg == "--small-only") small_only = true;
    if (arg == "--split-min" && a + 1 < argc)
      tf::test_hooks::set_cuda_linear_split_min_rows(std::atoi(argv[++a]));
    if (arg == "--split-mma") tf::test_hooks::set_cuda_linear_split_mma(true);
    if (arg == "--configs" && a + 1 < argc)
      for (const char* p = argv[++a]; *p;) {
        char* end = nullptr;
        cfgs.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        p = *end ? end + 1 : end;
      }
  }
  if (cfgs.empty())
    for (int c = 0; c < tf::test_hooks::cuda_linear_small_configs(); ++c) cfgs.push_back(c);
  cudaDeviceProp prop{};
  TF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "linear_bench: %s, %d SMs; bf16 x, w and out, no bias; %d calls per timing; split form from %d rows\n",
      prop.name, prop.multiProcessorCount, reps, tf::test_hooks::cuda_linear_split_min_rows());
  g_hbm = tf::bench::copy_bandwidth();
  std::printf("bound: the weights, x and out once per call at the measured copy bandwidth, %.2f TB/s\n",
              g_hbm / 1e12);
  cudaStream_t s;
  TF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!large_only) decode_section(s, reps, cfgs);
  if (small_only) {
    TF_CUDA_CHECK(cudaStreamDestroy(s));
    return 0;
  }
  // Prefill and vision shapes (the 1B decoder over a page's 2,333 rows; the Pixtral tower over its
  // 9,350 patches): graph us and TFLOP/s of every large-row tile configuration, and whether its output
  // bits equal config 0's (they must: test_hooks::set_cuda_linear_large_config). `per_page`: calls per
  // page (decoder 28 layers: q, k, v, o, gate, up, down; vision 24 layers: q, k, v, o, gate, up, down;
  // "vis qkv" is a fused q|k|v projection, not in the page sum).
  struct Big {
    const char* name;
    int64_t n, in_f, out_f;
    int per_page;
    bool vision;
  };
  constexpr Big kBig[] = {
      {"dec q", 2333, 1024, 2048, 28, false},    {"dec k/v", 2333, 1024, 1024, 56, false},
      {"dec o", 2333, 2048, 1024, 28, false},    {"dec gate/up", 2333, 1024, 3072, 56, false},
      {"dec down", 2333, 3072, 1024, 28, false}, {"vis q/k/v/o", 9350, 1024, 1024, 96, true},
      {"vis qkv", 9350, 1024, 3072, 0, true},    {"vis gate/up", 9350, 1024, 4096, 48, true},
      {"vis down", 9350, 4096, 1024, 24, true}};
  const int n_cfg = tf::test_hooks::cuda_linear_large_configs();
  std::printf("\nlarge rows: configurations (test_hooks::set_cuda_linear_large_config):\n");
  for (int c = 0; c < n_cfg; ++c)
    std::printf("  cfg %d: %s\n", c, tf::test_hooks::cuda_linear_large_config_name(c));
  std::printf("%-12s %5s %5s %5s | %3s %9s %8s %5s\n", "shape", "rows", "in_f", "out_f", "cfg", "graph us",
              "TFLOP/s", "bits");
  std::vector<double> page_dec(static_cast<size_t>(n_cfg)), page_vis(static_cast<size_t>(n_cfg));
  int mismatches = 0;
  double best_dec = 0, best_vis = 0;  // the fastest configuration of each shape (a rule by shape)
  for (const Big& b : kBig) {
    void* wm = dev_alloc(static_cast<size_t>(b.in_f * b.out_f) * 2);
    void* xm = dev_alloc(static_cast<size_t>(b.n * b.in_f) * 2);
    void* om = dev_alloc(static_cast<size_t>(b.n * b.out_f) * 2);
    fill(wm, b.in_f * b.out_f, 7);
    fill(xm, b.n * b.in_f, 8);
    const Tensor w{wm, DType::BF16, {b.out_f, b.in_f}}, x{xm, DType::BF16, {b.n, b.in_f}},
        out{om, DType::BF16, {b.n, b.out_f}};
    const double flop =
        2.0 * static_cast<double>(b.n) * static_cast<double>(b.in_f) * static_cast<double>(b.out_f);
    std::vector<uint16_t> ref(static_cast<size_t>(b.n * b.out_f)), got(ref.size());
    double best_us = 1e30;
    int best = 0;
    for (int cfg = 0; cfg < n_cfg; ++cfg) {
      tf::test_hooks::set_cuda_linear_large_config(cfg);
      TF_CUDA_CHECK(cudaMemsetAsync(om, 0xff, got.size() * 2, s));
      const Timing t = time_calls(s, {w}, x, out, std::max(5, reps / 10));
      TF_CUDA_CHECK(cudaStreamSynchronize(s));
      TF_CUDA_CHECK(
          cudaMemcpy(cfg == 0 ? ref.data() : got.data(), om, got.size() * 2, cudaMemcpyDeviceToHost));
      const bool same = cfg == 0 || got == ref;
      mismatches += same ? 0 : 1;
      std::printf("%-12s %5lld %5lld %5lld | %3d %9.2f %8.1f %5s\n", b.name, static_cast<long long>(b.n),
                  static_cast<long long>(b.in_f), static_cast<long long>(b.out_f), cfg, t.graph_us,
                  flop / (t.graph_us * 1e-6) / 1e12, same ? "same" : "DIFF");
      (b.vision ? page_vis : page_dec)[static_cast<size_t>(cfg)] += t.graph_us * b.per_page;
      if (t.graph_us < best_us) best_us = t.graph_us, best = cfg;
    }
    std::printf("%-12s best: cfg %d, %.2f us, %.1f TFLOP/s (%.0f%% of 790)\n", b.name, best, best_us,
                flop / (best_us * 1e-6) / 1e12, 100 * flop / (best_us * 1e-6) / 790e12);
    (b.vision ? best_vis : best_dec) += best_us * b.per_page;
    tf::test_hooks::set_cuda_linear_large_config(tf::test_hooks::cuda_linear_large_default());
    for (void* p : {wm, xm, om}) TF_CUDA_CHECK(cudaFree(p));
  }
  std::printf(
      "\none page's large-row linears per configuration (decoder 2,333 rows x 28 layers; vision 9,350 x "
      "24):\n");
  for (int c = 0; c < n_cfg; ++c)
    std::printf("  cfg %d: decoder %8.1f us, vision %8.1f us, total %8.1f us  (%s)\n", c,
                page_dec[static_cast<size_t>(c)], page_vis[static_cast<size_t>(c)],
                page_dec[static_cast<size_t>(c)] + page_vis[static_cast<size_t>(c)],
                tf::test_hooks::cuda_linear_large_config_name(c));
  std::printf("  best per shape: decoder %8.1f us, vision %8.1f us, total %8.1f us\n", best_dec, best_vis,
              best_dec + best_vis);
  std::printf("large-row configurations whose bits differ from cfg 0: %d (must be 0)\n\n", mismatches);

  TF_CUDA_CHECK(cudaStreamDestroy(s));
  return mismatches == 0 ? 0 : 1;
}
