// The bf16 flash attention (src/backend/cuda/attention_tc.cu and the wide variants of
// attention_tc_wide.cu) on the 1B page's shapes: the Pixtral tower's per-image attention (9,350 patches,
// 16 heads, head_dim 64, every patch sees the whole image) and the Qwen3 prefill (2,333 causal rows,
// 16 heads over 8 kv heads, head_dim 128). Per variant (test_hooks::set_cuda_attention_variant): graph us
// per call (CUDA events around a graph of `reps` captured calls, after a warm-up replay), TFLOP/s
// (4 · d · heads · Σ_rows keys seen), and whether its output bits equal variant 0's (they must).
// Then decode: B sequences of one row each over a paged cache of `ctx` keys (the 1B's 16 / 8 heads at
// head_dim 128, Qwen3.5's 8 / 2 at 256), with the key splits run split-parallel (production: kv-head groups
// packed into one block when that leaves >= 128 blocks; then forced packed, forced unpacked) and folded in
// one block per (sequence, head) (test_hooks::set_cuda_attention_partials(false): the kernel's old
// parallelism), and "64-row": the split-parallel form in attention_tc.cu's 64-row blocks, one warp live,
// instead of attention_tc_decode.cu's 16-row blocks (test_hooks::set_cuda_attention_decode_form(false)), and
// "ring": attention_tc_decode.cu's tile ring where production runs attention_tc_decode_chunks.cu's chunks
// (test_hooks::set_cuda_attention_decode_chunks(0)); all must give the same bits. Bound = the K/V bytes read
// once at the device's copy bandwidth, measured at the start (bench_cuda.h). Built with -DTF_BENCH=ON where
// the CUDA backend is built; runs on the GPU machine:
//   attention_bench [reps] [split] [CTX B]   (defaults: 20 calls; keys per split: the backend's, 512 (0);
//                                             CTX B: only the decode cases of that context and batch
//                                             (any), for ncu)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../bench_cuda.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/test_hooks.h"

namespace {

double g_hbm = 4.3e12;  // bytes/s: set from tf::bench::copy_bandwidth() in main

using tf::DType;
using tf::Tensor;

using tf::bench::dev_alloc;

// Deterministic bf16 values in about ±[2^-3, 2), never NaN or Inf (scores of a few units, as in a layer).
void fill(void* dev, int64_t n, uint32_t seed) { tf::bench::fill_bf16(dev, n, seed, 124, 3); }

struct Shape {
  const char* name;
  int64_t n, heads, kv_heads, d;
  int kind;  // 0: one image (all keys), 1: causal, 2: two images side by side
};

// Graph-replay microseconds per call of f (after one warm-up call and one warm-up replay).
template <class F>
double graph_us(cudaStream_t s, int reps, F f) {
  f();
  TF_CUDA_CHECK(cudaStreamSynchronize(s));
  return 1e3 *
         tf::bench::graph_replay_ms(s,
                                    [&] {
                                      for (int r = 0; r < reps; ++r) f();
                                    }) /
         reps;
}

// Paged decode rows: split-parallel against folded in the block; returns how many cases' bits differ.
int decode_table(cudaStream_t s, int reps, int64_t only_ctx, int64_t only_b) {
  struct Dec {
    const char* name;
    int64_t heads, kv_heads, d;
  };
  constexpr Dec kDec[] = {{"1B decode", 16, 8, 128}, {"qwen3.5 decode", 8, 2, 256}};
  std::printf("\n%-15s %4s %5s | %10s %9s %9s %9s %9s %10s %7s %9s %5s\n", "decode", "B", "ctx", "split us",
              "packed", "unpacked", "ring us", "64-row us", "1-block us", "speedup", "bound us", "bits");
  int differ = 0;
  for (const Dec& dc : kDec)
    for (int64_t ctx : only_ctx > 0 ? std::vector<int64_t>{only_ctx} : std::vector<int64_t>{200, 2333, 4096})
      for (int64_t B : only_ctx > 0 ? std::vector<int64_t>{only_b} : std::vector<int64_t>{1, 8, 64}) {
        const int64_t nb = (ctx + tf::kKvBlock - 1) / tf::kKvBlock, pool = B * nb * tf::kKvBlock;
        const int64_t nq = B * dc.heads * dc.d, nkv = pool * dc.kv_heads * dc.d;
        void* qm = dev_alloc(static_cast<size_t>(nq) * 2);
        void* km = dev_alloc(static_cast<size_t>(nkv) * 2);
        void* vm = dev_alloc(static_cast<size_t>(nkv) * 2);
        void* om = dev_alloc(static_cast<size_t>(nq) * 2);
        void* im = dev_alloc(static_cast<size_t>(B * nb + B + 1 + 2 * B) * 4);
        fill(qm, nq, 11);
        fill(km, nkv, 12);
        fill(vm, nkv, 13);
        std::vector<int32_t> ints;  // tables [B, nb] (sequence b owns blocks b * nb ..), seg_rows, ranges
        for (int64_t i = 0; i < B * nb; ++i) ints.push_back(static_cast<int32_t>(i));
        for (int64_t i = 0; i <= B; ++i) ints.push_back(static_cast<int32_t>(i));
        for (int64_t i = 0; i < B; ++i) ints.insert(ints.end(), {0, static_cast<int32_t>(ctx)});
        TF_CUDA_CHECK(cudaMemcpy(im, ints.data(), ints.size() * 4, cudaMemcpyHostToDevice));
        auto* ip = static_cast<int32_t*>(im);
        const Tensor q{qm, DType::BF16, {B, dc.heads, dc.d}}, out{om, DType::BF16, {B, dc.heads, dc.d}},
            k{km, DType::BF16, {pool, dc.kv_heads, dc.d}}, v{vm, DType::BF16, {pool, dc.kv_heads, dc.d}},
            tables{ip, DType::I32, {B, nb}}, seg_rows{ip + B * nb, DType::I32, {B + 1}},
            ranges{ip + B * nb + B + 1, DType::I32, {B, 2}};
        const float scale = 1.0f / std::sqrt(static_cast<float>(dc.d));
        auto run = [&] {
          tf::cuda::launch_paged_attention_tc(s, q, k, v, tables, seg_rows, ranges, scale, out);
        };
        std::vector<uint16_t> a(static_cast<size_t>(nq)), b(a.size());
        const double split_us = graph_us(s, reps, run);
        TF_CUDA_CHECK(cudaMemcpy(a.data(), om, a.size() * 2, cudaMemcpyDeviceToHost));
        double forced[2];  // kv-head groups packed into one block (1) or not (0)
        bool forced_same = true;
        for (int p = 0; p < 2; ++p) {
          tf::test_hooks::set_cuda_attention_pack(1 - p);
          forced[p] = graph_us(s, reps, run);
          TF_CUDA_CHECK(cudaMemcpy(b.data(), om, b.size() * 2, cudaMemcpyDeviceToHost));
          forced_same = forced_same && a == b;
        }
        tf::test_hooks::set_cuda_attention_pack(-1);
        tf::test_hooks::set_cuda_attention_decode_chunks(0);  // the tile ring whatever the grid
        const double ring_us = graph_us(s, reps, run);
        TF_CUDA_CHECK(cudaMemcpy(b.data(), om, b.size() * 2, cudaMemcpyDeviceToHost));
        forced_same = forced_same && a == b;
        tf::test_hooks::set_cuda_attention_decode_chunks(-1);
        tf::test_hooks::set_cuda_attention_decode_form(false);  // one live warp in 64-row blocks
        const double old_us = graph_us(s, reps, run);
        TF_CUDA_CHECK(cudaMemcpy(b.data(), om, b.size() * 2, cudaMemcpyDeviceToHost));
        forced_same = forced_same && a == b;
        tf::test_hooks::set_cuda_attention_decode_form(true);
        tf::test_hooks::set_cuda_attention_partials(false);
        const double one_us = graph_us(s, reps, run);
        TF_CUDA_CHECK(cudaMemcpy(b.data(), om, b.size() * 2, cudaMemcpyDeviceToHost));
        tf::test_hooks::set_cuda_attention_partials(true);
        const double bound = 2.0 * B * ctx * dc.kv_heads * dc.d * 2 / g_hbm * 1e6;
        const bool same = a == b && forced_same;
        differ += same ? 0 : 1;
        std::printf("%-15s %4lld %5lld | %10.1f %9.1f %9.1f %9.1f %9.1f %10.1f %6.2fx %9.2f %5s\n", dc.name,
                    static_cast<long long>(B), static_cast<long long>(ctx), split_us, forced[0], forced[1],
                    ring_us, old_us, one_us, one_us / split_us, bound, same ? "same" : "DIFF");
        for (void* p : {qm, km, vm, om, im}) TF_CUDA_CHECK(cudaFree(p));
      }
  std::printf("decode cases whose bits differ between the two forms: %d (must be 0)\n", differ);
  return differ;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  cudaDeviceProp prop{};
  TF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int split = argc > 2 ? std::atoi(argv[2]) : 0;  // 0: the default
  tf::test_hooks::set_cuda_attention_split(split);
  std::printf("attention_bench: %s, %d SMs; bf16; %d calls per timing; key split %s\n", prop.name,
              prop.multiProcessorCount, reps, split ? argv[2] : "default");
  g_hbm = tf::bench::copy_bandwidth();
  std::printf("bound: the K/V bytes read once at the measured copy bandwidth, %.2f TB/s\n", g_hbm / 1e12);
  cudaStream_t s;
  TF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int n_var = tf::test_hooks::cuda_attention_variants();
  constexpr Shape kShapes[] = {{"vision 1 image", 9350, 16, 16, 64, 0},
                               {"vision 2 images", 9350, 16, 16, 64, 2},
                               {"prefill causal", 2333, 16, 8, 128, 1}};
  std::printf("%-16s %5s %5s %4s | %3s %9s %8s %5s\n", "shape", "rows", "heads", "d", "var", "graph us",
              "TFLOP/s", "bits");
  int mismatches = 0;
  const int64_t only_ctx = argc > 4 ? std::atoll(argv[3]) : 0, only_b = argc > 4 ? std::atoll(argv[4]) : 0;
  for (const Shape& sh : kShapes) {
    if (only_ctx > 0) break;
    const int64_t nq = sh.n * sh.heads * sh.d, nkv = sh.n * sh.kv_heads * sh.d;
    void* qm = dev_alloc(static_cast<size_t>(nq) * 2);
    void* km = dev_alloc(static_cast<size_t>(nkv) * 2);
    void* vm = dev_alloc(static_cast<size_t>(nkv) * 2);
    void* om = dev_alloc(static_cast<size_t>(nq) * 2);
    void* rm = dev_alloc(static_cast<size_t>(2 * sh.n) * 4);
    fill(qm, nq, 1);
    fill(km, nkv, 2);
    fill(vm, nkv, 3);
    std::vector<int32_t> ranges(static_cast<size_t>(2 * sh.n));
    double keys_seen = 0;
    for (int64_t i = 0; i < sh.n; ++i) {
      int32_t b = 0, e = static_cast<int32_t>(sh.n);
      if (sh.kind == 1) e = static_cast<int32_t>(i + 1);
      if (sh.kind == 2) (i < sh.n / 2 ? e : b) = static_cast<int32_t>(sh.n / 2);
      ranges[static_cast<size_t>(2 * i)] = b;
      ranges[static_cast<size_t>(2 * i + 1)] = e;
      keys_seen += e - b;
    }
    TF_CUDA_CHECK(cudaMemcpy(rm, ranges.data(), ranges.size() * 4, cudaMemcpyHostToDevice));
    const Tensor q{qm, DType::BF16, {sh.n, sh.heads, sh.d}}, k{km, DType::BF16, {sh.n, sh.kv_heads, sh.d}},
        v{vm, DType::BF16, {sh.n, sh.kv_heads, sh.d}}, out{om, DType::BF16, {sh.n, sh.heads, sh.d}},
        rg{rm, DType::I32, {sh.n, 2}};
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.d));
    const double flop = 4.0 * static_cast<double>(sh.d) * static_cast<double>(sh.heads) * keys_seen;
    std::vector<uint16_t> ref(static_cast<size_t>(nq)), got(ref.size());
    for (int var = 0; var < n_var; ++var) {
      tf::test_hooks::set_cuda_attention_variant(var);
      TF_CUDA_CHECK(cudaMemsetAsync(om, 0xff, got.size() * 2, s));
      auto run = [&] { tf::cuda::launch_attention(s, q, k, v, rg, scale, out); };
      const double us = graph_us(s, reps, run);  // warm-up first: smem attributes
      TF_CUDA_CHECK(
          cudaMemcpy(var == 0 ? ref.data() : got.data(), om, got.size() * 2, cudaMemcpyDeviceToHost));
      const bool same = var == 0 || got == ref;
      mismatches += same ? 0 : 1;
      std::printf("%-16s %5lld %5lld %4lld | %3d %9.1f %8.1f %5s\n", sh.name, static_cast<long long>(sh.n),
                  static_cast<long long>(sh.heads), static_cast<long long>(sh.d), var, us,
                  flop / (us * 1e-6) / 1e12, same ? "same" : "DIFF");
    }
    tf::test_hooks::set_cuda_attention_variant(tf::test_hooks::cuda_attention_default());
    for (void* p : {qm, km, vm, om, rm}) TF_CUDA_CHECK(cudaFree(p));
  }
  std::printf("variants whose bits differ from variant 0: %d (must be 0)\n", mismatches);
  mismatches += decode_table(s, reps, only_ctx, only_b);
  TF_CUDA_CHECK(cudaStreamDestroy(s));
  return mismatches == 0 ? 0 : 1;
}
