// linear on tensor cores for calls of <= 64 rows (decode, draft verification, small batches): the
// weight stream at memory speed, with the bits of every other configuration of linear_tc.cu.
//
// Arithmetic (the contract at the top of linear_tc.cu, unchanged): k cut into chunks of kc = 256, each
// chunk's partial an f32 chain of mma.sync m16n8k16 over its k in increasing 16-wide steps from zero (x
// the A operand, w the B operand, loaded by the same ldmatrix forms; a last 16-step that reaches past
// in_f is zero-filled, steps wholly past it are skipped), the partials added in f32 in chunk order
// (total = p_0, then total += p_c), + bias in f32, one rounding. So a row's bits equal those of the
// chunks kernel and the tiled kernels whatever the row count (the contract test checks it for every
// configuration here).
//
// Where the time goes at decode sizes (H200, bench/linear/linear_bench.cpp; BENCHMARKS.md "Decode GEMV"): the
// per-layer matrices are 4-12 MB, 1-3 us of stream, and a call that moves almost nothing (1 x 8 -> 8) costs 2
// us inside a CUDA graph, so the fixed cost per call (launch, first-byte latency, the block's fold and exit)
// is half of every call; the bytes in flight were never short. linear_tc.cu's chunks kernel (configuration 0
// of test_hooks::set_cuda_linear_small_config) added to that: a generic staging loop per 16-byte copy
// (runtime trip counts, 64-bit index arithmetic, divisions) that made each warp's prologue long (its launch
// floor is 3.2 us against 2.0 here), 12 chunks in two rounds of 8 warps, and 8-column blocks (qkv 512 blocks,
// lm_head 19,000) where 16-column ones stream faster.
//
// This kernel: a block owns BN = 8 * NT output columns over all of k; its nw warps (nw = min(chunks, a
// cap), a launch parameter) take chunks w, w + nw, ... Each lane computes its copy addresses once; a
// sub-tile's copies are then kWVec + kXVec unrolled cp.async with fixed offsets. A warp streams its
// sub-tiles (SUB of k, x rows then w rows) through its own S-deep ring: the first S - 1 (a whole
// 256-chunk at SUB 64, S 5) are in flight before any math. The partials meet in shared memory and are
// added in chunk order once per round of nw chunks (one round up to 16 chunks). With programmatic
// dependent launch (launch attribute; `griddepcontrol`), the weights of the first S - 1 sub-tiles are
// requested before the kernel waits for the previous one (weights never depend on it), x after. Calls with
// more tiles than fit on the SMs at once (lm_head; the 4B's 2560-wide rows, whose 10 warps a block leave one
// block per SM: gate|up 1,152 tiles in ~9 waves) launch only the resident blocks, each walking tiles
// blockIdx.x + m gridDim.x with one continuous stream per warp, so the next tile's weights load while the
// current tile folds and stores (a column's arithmetic is the same whichever block computes it).
//
// Shapes: x [n, in_f] bf16 (n <= 16 * MT); per weight (up to kMaxSegs, linear_many) w [out_f, in_f] bf16,
// bias [out_f] bf16 or null, out [n, out_f] bf16/f32; in_f % 8 == 0 and 16-byte aligned x and w (else the
// caller runs linear_tc.cu).
#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <span>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pdl.cuh"
#include "backend/test_hooks.h"

namespace tf::cuda {
namespace {

using namespace mma;

// MT m16 tiles of rows (BM = 16 MT), NT n8 tiles of columns (BN = 8 NT), sub-tiles of SUB k, S stages.
// Shared memory: the partials [nw][BM * BN] f32, then per warp S stages of [xrows + BN][SUB + 8] bf16
// (x's real rows, then w's BN rows; the 8 pad elements put 8 consecutive rows on distinct banks).
template <int MT, int NT, int SUB, int S>
struct SmallCfg {
  static constexpr int kBM = 16 * MT, kBN = 8 * NT, kLd = SUB + 8;
  static constexpr int kVec = SUB / 8;                   // 16-byte vectors per sub-tile row
  static constexpr int kRpv = 32 / kVec;                 // rows one warp-wide copy covers
  static constexpr int kWVec = kBN / kRpv;               // w copies per lane per sub-tile
  static constexpr int kXVec = (kBM + kRpv - 1) / kRpv;  // x copies per lane per sub-tile, at most
  static constexpr int kPer = kBM * kBN / 32;            // folded outputs per thread, at most (nw = 1)
  static_assert(32 % kVec == 0 && kBN % kRpv == 0 && 256 % SUB == 0 && SUB % 16 == 0 && S >= 2);
  __host__ __device__ static size_t part_bytes(int nw) { return size_t(nw) * kBM * kBN * sizeof(float); }
  static size_t smem(int xrows, int nw) {
    return part_bytes(nw) + size_t(nw) * S * size_t(xrows + kBN) * kLd * sizeof(bf16_t);
  }
};

// One 16-step of k: the A fragments of the MT m16 tiles (rows past the call's last read that row: output
// row i depends only on row i of A) times NT n8 tiles of w, one mma per (m16, n8): linear_tc.cu's step.
template <int MT, int NT, int LD>
__device__ __forceinline__ void small_step(float (&acc)[MT][NT][4], const bf16_t* sx, const bf16_t* sw,
                                           int kk, int lane, int n, int mt_live) {
  uint32_t af[MT][4];
#pragma unroll
  for (int a = 0; a < MT; ++a) {
    const int row = min(a * 16 + lane % 16, n - 1);
    if (a < mt_live) ldmatrix_x4(af[a], sx + row * LD + kk + (lane / 16) * 8);
  }
  if constexpr (NT == 1) {
    uint32_t bf[2];  // one n8 tile: rows lane % 8, k offset 8 * ((lane / 8) % 2) (lanes 16..31 unused)
    ldmatrix_x2(bf, sw + (lane % 8) * LD + kk + ((lane / 8) % 2) * 8);
#pragma unroll
    for (int a = 0; a < MT; ++a)
      if (a < mt_live) mma_bf16(acc[a][0], af[a], bf[0], bf[1]);
  } else {
#pragma unroll
    for (int b = 0; b < NT; b += 2) {
      uint32_t bf[4];  // two n8 tiles: rows (lane % 8) + 8 (lane / 16), k offset 8 ((lane / 8) % 2)
      ldmatrix_x4(bf, sw + (b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kk + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int a = 0; a < MT; ++a)
        if (a < mt_live) {
          mma_bf16(acc[a][b], af[a], bf[0], bf[1]);
          mma_bf16(acc[a][b + 1], af[a], bf[2], bf[3]);
        }
    }
  }
}

// Up to kMaxSegs weights sharing x (linear_many: a layer's projections of one input), their BN-column tiles
// numbered one after another: segment s owns tiles [tile0[s], tile0[s + 1]).
constexpr int kMaxSegs = 4;
template <class TO>
struct Segs {
  const bf16_t* w[kMaxSegs];
  const bf16_t* bias[kMaxSegs];
  TO* out[kMaxSegs];
  int out_f[kMaxSegs];
  int tile0[kMaxSegs + 1];
  int count;
};

template <class Cfg, int MT, int NT, int SUB, int S, class TO>
__global__ void __launch_bounds__(512) linear_tc_small_kernel(const bf16_t* __restrict__ x, const Segs<TO> sg,
                                                              int n, int in_f, int kc, int trigger) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, LD = Cfg::kLd, RPV = Cfg::kRpv;
  const int nw = static_cast<int>(blockDim.x / 32), warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n_tiles = sg.tile0[sg.count];  // BN-column tiles: this block's are blockIdx.x + m gridDim.x
  auto seg_of = [&](int tile) {
    int sgi = 0;
    while (sgi + 1 < sg.count && tile >= sg.tile0[sgi + 1]) ++sgi;
    return sgi;
  };
  const int n_chunks = (in_f + kc - 1) / kc, n_sub = kc / SUB, rounds = (n_chunks + nw - 1) / nw;
  const int mt_live = (n + 15) / 16;
  float* part = reinterpret_cast<float*>(smem_raw);
  const int stage = (n + BN) * LD;  // elements per stage: x rows [0, n), then w rows [n, n + BN)
  bf16_t* ring = reinterpret_cast<bf16_t*>(smem_raw + Cfg::part_bytes(nw)) + warp * S * stage;

  // This lane's copies: vector i of a sub-tile is row vr + i * RPV, columns [vc, vc + 8) (w rows from the
  // tile's first column j0, x rows from 0). Rows past out_f are zero-filled (their outputs are not stored); x
  // rows past n are not copied (never read); a vector past in_f is zero-filled (in_f % 8 == 0: all in or all
  // out).
  const int vr = lane / Cfg::kVec, vc = (lane % Cfg::kVec) * 8;
  const bf16_t* xg = x + static_cast<int64_t>(min(vr, n - 1)) * in_f + vc;
  const int64_t w_step = static_cast<int64_t>(RPV) * in_f;  // between a lane's consecutive w vectors
  auto issue_w = [&](int slot, int tile, int k0) {
    const int sgi = seg_of(tile), out_f = sg.out_f[sgi];
    const bf16_t* w = sg.w[sgi];
    const int j0 = (tile - sg.tile0[sgi]) * BN;
    const int w_rows_left = out_f - j0 - vr;  // vector i is real while i * RPV < this
    const bf16_t* wg = w + static_cast<int64_t>(min(j0 + vr, out_f - 1)) * in_f + vc;
    bf16_t* sw = ring + slot * stage + (n + vr) * LD + vc;
    const bool kok = k0 + vc < in_f;
#pragma unroll
    for (int i = 0; i < Cfg::kWVec; ++i) {
      const bool ok = kok && i * RPV < w_rows_left;
      cp_async16(sw + i * RPV * LD, ok ? wg + i * w_step + k0 : w, ok);
    }
  };
  auto issue_x = [&](int slot, int k0) {
    bf16_t* sx = ring + slot * stage + vr * LD + vc;
    const bool kok = k0 + vc < in_f;
#pragma unroll
    for (int i = 0; i < Cfg::kXVec; ++i)
      if (vr + i * RPV < n) cp_async16(sx + i * RPV * LD, kok ? xg + i * w_step + k0 : x, kok);
  };
  // The sub-tiles this warp streams, in order, across the block's tiles: per tile, round r's chunk
  // warp + r * nw while it exists, parts 0 .. n_sub - 1. So the next tile's weights are in flight while the
  // current one's last chunks are computed and folded.
  int next_t = static_cast<int>(blockIdx.x), next_r = 0, next_part = 0;
  // k and tile of the next sub-tile to issue (k = in_f: none left), then advance.
  auto next_k = [&](int& tile) {
    if (next_t < n_tiles && warp + next_r * nw >= n_chunks) next_t += static_cast<int>(gridDim.x), next_r = 0;
    tile = next_t;
    if (next_t >= n_tiles) return in_f;
    const int k = (warp + next_r * nw) * kc + next_part * SUB;
    if (++next_part == n_sub) next_part = 0, ++next_r;
    return k;
  };

  // Prologue: the weights of sub-tiles 0 .. S - 2 (they never depend on the previous kernel), then, once
  // the previous kernel is done (a no-op without programmatic dependent launch), their x in one group.
  int pro_k[S - 1];
#pragma unroll
  for (int q = 0; q < S - 1; ++q) {
    int tile;
    pro_k[q] = next_k(tile);
    if (pro_k[q] < in_f) issue_w(q, tile, pro_k[q]);
    cp_async_commit();
  }
  pdl_wait();
#pragma unroll
  for (int q = 0; q < S - 1; ++q)
    if (pro_k[q] < in_f) issue_x(q, pro_k[q]);
  cp_async_commit();
  if (trigger) pdl_trigger();

  const int per_thread = (n * BN + nw * 32 - 1) / (nw * 32);
  int q = 0;  // this warp's next sub-tile to compute
  for (int tile = static_cast<int>(blockIdx.x); tile < n_tiles; tile += static_cast<int>(gridDim.x)) {
    float total[Cfg::kPer];
#pragma unroll
    for (float& t : total) t = 0.0f;
    for (int r = 0; r < rounds; ++r) {
      const int c = warp + r * nw;
      if (c < n_chunks) {  // chunk c, from zero
        float acc[MT][NT][4];
#pragma unroll
        for (int a = 0; a < MT; ++a)
#pragma unroll
          for (int b = 0; b < NT; ++b)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[a][b][e] = 0.0f;
        for (int p = 0; p < n_sub; ++p, ++q) {
          if (q == 0)
            cp_async_wait<0>();  // the prologue's groups (x came last)
          else
            cp_async_wait<S - 2>();
          __syncwarp();  // every lane's copies of sub-tile q landed; slot (q - 1) % S is no longer read
          {
            int nt;
            const int k = next_k(nt), slot = (q + S - 1) % S;
            if (k < in_f) {
              issue_w(slot, nt, k);
              issue_x(slot, k);
            }
            cp_async_commit();
          }
          const int k0 = c * kc + p * SUB;
          const bf16_t* sx = ring + (q % S) * stage;
#pragma unroll
          for (int kk = 0; kk < SUB; kk += 16) {
            if (k0 + kk >= in_f) break;  // the same chain length in every configuration
            small_step<MT, NT, LD>(acc, sx, sx + n * LD, kk, lane, n, mt_live);
          }
        }
        const int g = lane / 4, t = lane % 4;
        float* pw = part + warp * BM * BN;
#pragma unroll
        for (int a = 0; a < MT; ++a)
#pragma unroll
          for (int b = 0; b < NT; ++b)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              pw[(a * 16 + g + (e / 2) * 8) * BN + b * 8 + 2 * t + e % 2] = acc[a][b][e];
      }
      __syncthreads();
      // Fold this round's partials into the running sums in chunk order (only the call's real rows).
#pragma unroll
      for (int m = 0; m < Cfg::kPer; ++m) {
        if (m >= per_thread) break;
        const int e = static_cast<int>(threadIdx.x) + m * nw * 32;
        if (e >= n * BN) break;
        for (int wi = 0; wi < nw && r * nw + wi < n_chunks; ++wi) {
          const float v = part[wi * BM * BN + e];
          total[m] = (r == 0 && wi == 0) ? v : total[m] + v;
        }
      }
      __syncthreads();  // the partials are rewritten by the next round or tile
    }

    const int sgi = seg_of(tile), j0 = (tile - sg.tile0[sgi]) * BN, out_f = sg.out_f[sgi];
    const bf16_t* bias = sg.bias[sgi];
    TO* out = sg.out[sgi];
#pragma unroll
    for (int m = 0; m < Cfg::kPer; ++m) {
      if (m >= per_thread) break;
      const int e = static_cast<int>(threadIdx.x) + m * nw * 32;
      const int i = e / BN, j = j0 + e % BN;
      if (i >= n) break;
      if (j >= out_f) continue;
      float v = total[m];
      if (bias) v += to_f(bias[j]);
      out[static_cast<int64_t>(i) * out_f + j] = from_f<TO>(v);
    }
  }
  cp_async_wait<0>();
}

// Candidates (test_hooks::set_cuda_linear_small_config 1..): n8 tiles per block for calls of <= 4 and
// 5..16 rows (0: the occupancy rule of plan_nt below; 17..64 rows: 64 x 16 blocks always), the warp cap, and
// programmatic dependent launch (0 off, 1 wait for the previous kernel after the weight prologue, 2 also let
// the next kernel launch early). Measured on the H200 (bench/linear/linear_bench.cpp, BENCHMARKS.md).
struct Variant {
  int nt_small, nt_mid, nw_cap, pdl;
  const char* name;
};
constexpr Variant kVariants[] = {
    {1, 2, 16, 0, "gemv 8/16 cols (<=4/<=16 rows), <=16 warps"},
    {1, 1, 16, 0, "gemv 8/8 cols, <=16 warps"},
    {2, 4, 16, 0, "gemv 16/32 cols, <=16 warps"},
    {1, 2, 8, 0, "gemv 8/16 cols, <=8 warps"},
    {1, 2, 16, 1, "gemv 8/16 cols, <=16 warps, PDL wait"},
    {1, 2, 16, 2, "gemv 8/16 cols, <=16 warps, PDL wait + early trigger"},
    {2, 2, 16, 0, "gemv 16 cols, <=16 warps"},
    {0, 0, 16, 0, "gemv cols by occupancy (8/16/32), <=16 warps"},
    {0, 0, 16, 1, "gemv cols by occupancy, <=16 warps, PDL wait"},
    {0, 0, 16, 2, "gemv cols by occupancy, <=16 warps, PDL wait + early trigger"},
};
constexpr int kNumVariants = static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0]));

// One configuration's launch shape: nw warps (chunks per round; fewer where shared memory runs out), the
// dynamic shared memory, the blocks, and how many blocks fit on one SM.
struct Plan {
  int nw = 1, rounds = 1, blocks = 0, per_sm = 0;
  size_t smem = 0;
};

template <int MT, int NT>
struct Shape {
  // <= 16 rows: 64-wide sub-tiles, 5 deep (a whole chunk in flight per warp before its first mma);
  // 17..64 rows: x dominates a stage, so 32-wide sub-tiles, 4 deep.
  static constexpr int SUB = MT == 1 ? 64 : 32, S = MT == 1 ? 5 : 4;
  using Cfg = SmallCfg<MT, NT, SUB, S>;
};

template <int MT, int NT, class TO>
auto small_kernel() {
  using Sh = Shape<MT, NT>;
  return linear_tc_small_kernel<typename Sh::Cfg, MT, NT, Sh::SUB, Sh::S, TO>;
}

// The device's opt-in shared memory per block, set as the kernel's dynamic limit once per device (a
// function attribute belongs to one device's context; serve --devices runs one backend per GPU).
template <int MT, int NT, class TO>
int max_smem() {
  static OncePerDevice attr;
  static std::atomic<int> optin{0};
  attr.run([](int dev) {
    int v = 0;
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    TF_CUDA_CHECK(
        cudaFuncSetAttribute(small_kernel<MT, NT, TO>(), cudaFuncAttributeMaxDynamicSharedMemorySize, v));
    optin.store(v, std::memory_order_relaxed);
  });
  return optin.load(std::memory_order_relaxed);
}

template <int MT, int NT, class TO>
Plan plan(int n, int in_f, int out_f, int kc, int nw_cap, bool occupancy) {  // out_f: all segments' columns
  using Cfg = typename Shape<MT, NT>::Cfg;
  const int limit = max_smem<MT, NT, TO>();
  const int n_chunks = (in_f + kc - 1) / kc;
  Plan p;
  p.nw = std::min(n_chunks, nw_cap);
  while (p.nw > 1 && Cfg::smem(n, p.nw) > static_cast<size_t>(limit)) --p.nw;
  TF_CHECK(Cfg::smem(n, p.nw) <= static_cast<size_t>(limit));
  p.rounds = (n_chunks + p.nw - 1) / p.nw;
  p.smem = Cfg::smem(n, p.nw);
  p.blocks = static_cast<int>(blocks_for(out_f, 8 * NT));
  if (occupancy)
    TF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&p.per_sm, small_kernel<MT, NT, TO>(),
                                                                32 * p.nw, p.smem));
  return p;
}

// test_hooks::set_cuda_linear_small_grid_cap, or TF_CUDA_LINEAR_SMALL_GRID for whole runs (1000000: a block
// per tile, the form before tiles were walked).
std::atomic<int> g_grid_cap{env_choice("TF_CUDA_LINEAR_SMALL_GRID", 0, 1 << 30, 0)};

// The blocks of a launch: every tile's block at once where they fit on the SMs (one wave), else as many as
// fit (each then walks several tiles, its weight stream running on across them: no wave's start and drain
// between). test_hooks::set_cuda_linear_small_grid_cap lowers it. Cached per (warps, shared memory).
template <int MT, int NT, class TO>
int resident_blocks(const Plan& p) {
  if (const int cap = g_grid_cap.load(std::memory_order_relaxed); cap > 0) return cap;
  static std::mutex mu;
  static std::map<std::array<int64_t, 3>, int> cache;
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  const std::array<int64_t, 3> key{dev, p.nw, static_cast<int64_t>(p.smem)};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  int per_sm = 0, sms = 0;
  TF_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, small_kernel<MT, NT, TO>(), 32 * p.nw, p.smem));
  TF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int v = std::max(1, per_sm) * sms;
  cache[key] = v;
  return v;
}

template <int MT, int NT, class TO>
void launch_small(cudaStream_t s, const bf16_t* x, Segs<TO> sg, int n, int in_f, int out_f, int kc,
                  int nw_cap, int pdl) {
  TF_CHECK((kc % Shape<MT, NT>::SUB == 0 && n <= 16 * MT));
  Plan p = plan<MT, NT, TO>(n, in_f, out_f, kc, nw_cap, false);
  sg.tile0[0] = 0;
  for (int i = 0; i < sg.count; ++i)
    sg.tile0[i + 1] = sg.tile0[i] + static_cast<int>(blocks_for(sg.out_f[i], 8 * NT));
  p.blocks = sg.tile0[sg.count];
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(std::min(p.blocks, resident_blocks<MT, NT, TO>(p))));
  cfg.blockDim = dim3(static_cast<unsigned>(32 * p.nw));
  cfg.dynamicSmemBytes = p.smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl > 0 ? 1 : 0;
  TF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, small_kernel<MT, NT, TO>(), x, sg, n, in_f, kc, pdl > 1 ? 1 : 0));
}

// <= 16 rows, the occupancy rule: the widest blocks (32, 16, then 8 columns) that still give >= 64 blocks,
// all resident at once (one wave) and every chunk in one round. Measured on the H200, fewer and wider
// blocks stream faster as long as they cover the SMs in one wave (each block's start, fold and exit cost
// time the weight stream does not hide). Where no width fits one wave (lm_head; gate|up at 16 rows) the
// resident blocks walk the tiles: the width that loads the busiest block least, 16 columns on a tie (the
// fastest of the three for lm_head when each block had one tile). Cached per (n, in_f, out_f, kc, out
// dtype).
template <class TO>
int plan_nt(int n, int in_f, int out_f, int kc, int nw_cap) {
  static std::mutex mu;
  static std::map<std::array<int, 5>, int> cache;
  const std::array<int, 5> key{n, in_f, out_f, kc, nw_cap};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  static const int sms = [] {
    int dev = 0, v = 0;
    TF_CUDA_CHECK(cudaGetDevice(&dev));
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  auto fits = [&](const Plan& p) { return p.blocks >= 64 && p.blocks <= p.per_sm * sms && p.rounds == 1; };
  // Where none fits: the width whose busiest resident block streams the fewest columns (its tiles times
  // their width), 16 on a tie. (The 4B's down_proj, 2,560 columns of 9,216, one 16-warp block per SM: 160
  // 16-column tiles on 132 blocks stream 32 columns in the busiest, 320 8-column tiles 24.)
  auto busiest = [&](const Plan& p, int width) {
    const int res = std::max(1, p.per_sm) * sms;
    return (p.blocks + res - 1) / res * width;
  };
  const Plan p4 = plan<1, 4, TO>(n, in_f, out_f, kc, nw_cap, true);
  const Plan p2 = plan<1, 2, TO>(n, in_f, out_f, kc, nw_cap, true);
  const Plan p1 = plan<1, 1, TO>(n, in_f, out_f, kc, nw_cap, true);
  int nt = 2;
  if (fits(p4))
    nt = 4;
  else if (fits(p2))
    nt = 2;
  else if (fits(p1))
    nt = 1;
  else if (busiest(p1, 8) < busiest(p2, 16) && busiest(p1, 8) <= busiest(p4, 32))
    nt = 1;
  else if (busiest(p4, 32) < busiest(p2, 16))
    nt = 4;
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = nt;
  return nt;
}

template <class TO>
void run_small(const Variant& v, cudaStream_t s, const bf16_t* x, const Segs<TO>& sg, int n, int in_f,
               int out_f, int kc) {
  int nt = n <= 4 ? v.nt_small : v.nt_mid;
  if (nt == 0 && n <= 16) nt = plan_nt<TO>(n, in_f, out_f, kc, v.nw_cap);
  // With programmatic dependent launch on (pdl.cuh), every configuration waits after its weight prologue and
  // lets the next kernel start early.
  const int pdl = pdl_enabled() ? 2 : v.pdl;
  auto go = [&](auto mt, auto ntc) {
    launch_small<decltype(mt)::value, decltype(ntc)::value, TO>(s, x, sg, n, in_f, out_f, kc, v.nw_cap, pdl);
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  if (n <= 16) {
    if (nt == 1)
      go(I1{}, I1{});
    else if (nt == 2)
      go(I1{}, I2{});
    else
      go(I1{}, I4{});
  } else {  // 64 x 16 per block (64 x 32 would need 64 accumulators and 64 running sums per thread)
    go(I4{}, I2{});
  }
}

}  // namespace

int linear_tc_small_variants() { return kNumVariants; }
const char* linear_tc_small_name(int which) {
  return which >= 1 && which <= kNumVariants ? kVariants[which - 1].name : "?";
}

bool launch_linear_tc_small(cudaStream_t s, int which, const Tensor& x, std::span<const Tensor> w,
                            std::span<const Tensor* const> bias, std::span<const Tensor> out, int kc) {
  const size_t count = w.size();
  if (which < 1 || which > kNumVariants || count < 1 || count > kMaxSegs) return false;
  TF_CHECK(out.size() == count && bias.size() == count);
  const int64_t n = x.dim(0), in_f = x.dim(1);
  const auto* xp = ptr<const bf16_t>(x);
  int64_t out_f = 0;
  bool ok = in_f % 8 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
  for (size_t i = 0; i < count; ++i) {
    ok = ok && reinterpret_cast<uintptr_t>(w[i].data) % 16 == 0 && w[i].dim(1) == in_f &&
         out[i].dtype == out[0].dtype;
    out_f += w[i].dim(0);
  }
  if (!ok || n < 1 || n > 64 || in_f > (int64_t{1} << 30) || out_f > (int64_t{1} << 30)) return false;
  if (kc % (n <= 16 ? 64 : 32) != 0) return false;
  const Variant& v = kVariants[which - 1];
  const int ni = static_cast<int>(n), ii = static_cast<int>(in_f), oi = static_cast<int>(out_f);
  auto go = [&](auto* tag) {
    using TO = std::remove_pointer_t<decltype(tag)>;
    Segs<TO> sg{};
    sg.count = static_cast<int>(count);
    for (size_t i = 0; i < count; ++i) {
      sg.w[i] = ptr<const bf16_t>(w[i]);
      sg.bias[i] = bias[i] ? ptr<const bf16_t>(*bias[i]) : nullptr;
      sg.out[i] = ptr<TO>(out[i]);
      sg.out_f[i] = static_cast<int>(w[i].dim(0));
    }
    run_small<TO>(v, s, xp, sg, ni, ii, oi, kc);
  };
  if (out[0].dtype == DType::BF16)
    go(static_cast<bf16_t*>(nullptr));
  else
    go(static_cast<float*>(nullptr));
  return true;
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_linear_small_grid_cap(int blocks) {
  TF_CHECK(blocks >= 0);
  tf::cuda::g_grid_cap.store(blocks, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
