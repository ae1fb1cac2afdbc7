// linear on tensor cores (bf16 x and w): out[n, out_f] = rnd(x[n, in_f] · w[out_f, in_f]^T + bias).
//
// Contract (backend/ops.h `linear`, the CUDA tolerance of tools/cuda_check/README.md): k is cut into
// fixed chunks of kChunk = 256 (the last one shorter where in_f is not a multiple). Each chunk's
// partial p_c is an f32 chain of mma.sync m16n8k16 over its k in increasing 16-wide steps, started from
// zero; the element is ((p_0 + p_1) + p_2) + ... in f32 in chunk order, + bias in f32, then one
// rounding. It differs from the CPU reference's 8-lane f32 dot only in the order of the f32 additions
// (and the tensor core's truncating internal ones), so a bf16 output is the CPU's or one ulp away where
// the two sums straddle a rounding boundary.
//
// Batch invariance: the chunks and each chunk's chain are fixed by in_f alone (steps past in_f are
// skipped, not multiplied by zero), and every configuration below computes exactly that arithmetic,
// so a row's bits are the same whether the call has 1, 8, 37 or 9,000 rows and whichever
// configuration ran it (mma.cuh explains why the instruction allows it). The configuration is picked
// from the shape only for speed:
// - 17..256 rows whose 64 x 64 tiles are fewer than two per SM and whose k has at least 5 chunks (many
//   sequences decoding: 1B o_proj at 128 rows has 32 tiles walking 2,048 of k each): the split form, one
//   block per (tile, k chunk) writing its partial p_c unrounded to a workspace (configuration 11's wgmma
//   blocks on compute capability 9.0, else the 64 x 64 tiled kernel below), and linear_split.cu's fold adding
//   them in chunk order (+ bias, one rounding): the same additions in the same order.
// - Else from 17 rows (kLargeMinRows; prefill, vision, lm_head over many sequences):
//   test_hooks::set_cuda_linear_large_config (or TF_CUDA_LINEAR_LARGE) picks the tiling: 0 and 1 below, 2..
//   the swizzled candidates of linear_tc_large.cu (shapes listed there), 10 and 11 the wgmma forms of
//   linear_tc_wgmma_sm90a.cu (the default); bench/linear/linear_bench.cpp times them all and the contract
//   test checks their bits equal config 0's.
// - <= 16 rows (decode, draft verification), or where none of the above applies (in_f % 8, alignment):
//   linear_tc_small.cu's kernel by default (test_hooks::set_cuda_linear_small_config; the same arithmetic,
//   its loads cheaper to issue) up to 64 rows, else the chunks kernel below. A block owns BN output columns
//   over all of k; its warps take chunks in turn (warp w: chunks w, w + NW, ...), each streaming its chunk
//   through its own cp.async ring, so up to NW chunks are in flight per block and the blocks (out_f / BN of
//   them, BN 8 or 16) cover the SMs; the partials meet in shared memory and are added in chunk order. Only
//   the call's real rows of x are staged (the mma's padding rows read a real row and are discarded: output
//   row i depends only on row i of A).
// - Past 64 rows otherwise: the tiled kernel, one k loop per block, the chunk sums beside the accumulators
//   (acc from zero for each chunk, total += acc at its end): the same additions in the same order.
//
// Shapes: x [n, in_f] bf16, w [out_f, in_f] bf16, bias [out_f] bf16 or null, out [n, out_f] bf16/f32.
#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/linear_split.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/test_hooks.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <span>

namespace tf::cuda {
namespace {

using namespace mma;

// The contract's k chunk (see the top of this file). Every configuration uses it; only the test hook
// below can change it, for the small-row configuration alone, to plant an invariance failure.
constexpr int kChunk = 256;
std::atomic<int> g_planted_small_chunk{0};
// From kLargeMinRows rows (where the split form does not run): 0 the 128 x 128 smem-sum tiles, 1 the 128 x 64
// register-sum tiles (both below), 2.. the swizzled candidates of linear_tc_large.cu (listed there). All the
// same bits. The default: config 11 (linear_tc_wgmma_sm90a.cu: 128 x 64 blocks of Hopper's wgmma, 4 stages,
// two per SM; config 7, the 128 x 64 mma.sync blocks, where the device is not compute capability 9.0).
// Measured on the H200 (bench/linear, BENCHMARKS.md "wgmma"): 1.4-1.6x config 7 on every prefill and vision
// shape; 10-12 % faster than config 10 (128 x 128) on the decoder's 2,333-row shapes, within 3 % of it on the
// vision tower's. Every configuration gives the same bits.
constexpr int kDefaultLargeConfig = 11;
// TF_CUDA_LINEAR_LARGE=N runs configuration N on those calls (benchmarks of a candidate in whole runs; the
// same bits whichever runs, as the contract checks); unset, empty or out of range: the default.
std::atomic<int> g_large_config{
    env_choice("TF_CUDA_LINEAR_LARGE", 0, linear_tc_large_end() - 1, kDefaultLargeConfig)};
// <= 64 rows: 0 the chunks kernel below, 1.. the candidates of linear_tc_small.cu (listed there). All the
// same bits. The default: 7 (linear_tc_small.cu: blocks of 16 columns, up to 16 warps), the fastest of those
// measured on the H200 (bench/linear, BENCHMARKS.md "Decode GEMV"; one decode step's linears at 1 row 747 us
// against the chunks kernel's 919); 11-15 (other weight rings) on an H100 ("the weight ring of the decode
// GEMV"): slower on the 1B, <= 3.4 % faster on the 4B. TF_CUDA_LINEAR_SMALL=N runs N in whole runs.
constexpr int kDefaultSmallConfig = 7;
std::atomic<int> g_small_config{
    env_choice("TF_CUDA_LINEAR_SMALL", 0, linear_tc_small_variants(), kDefaultSmallConfig)};
// The split form (linear_split.cu) for calls of kSplitMinRows .. kSplitMaxRows rows whose 64 x 64 tiles are
// fewer than kSplitBelowTiles (two per SM): one block per (tile, chunk), then the fold. The same bits;
// TF_CUDA_LINEAR_SPLIT_MIN / test_hooks::set_cuda_linear_split_min_rows move the lower end (above
// kSplitMaxRows: off).
constexpr int kSplitMinRows = 17, kSplitMaxRows = 256;
constexpr int64_t kSplitBelowTiles = 264;
std::atomic<int> g_split_min{env_choice("TF_CUDA_LINEAR_SPLIT_MIN", 1, kSplitMaxRows + 1, kSplitMinRows)};
// Calls whose k has fewer chunks than this stay unsplit (TF_CUDA_LINEAR_SPLIT_MIN_CHUNKS,
// test_hooks::set_cuda_linear_split_min_chunks). 5: in_f <= 1,024 (the 1B's q|k|v and gate|up) unsplit;
// measured on the H100 (linear_bench --small-only, one 1B step's linears): 128 rows 1,379 -> 1,155 us, 256
// rows 1,859 -> 1,613, 64 rows 1,169 -> 1,098 against 2 (every k of two chunks or more split); 32 rows equal.
constexpr int kSplitMinChunks = 5;
std::atomic<int> g_split_min_chunks{
    env_choice("TF_CUDA_LINEAR_SPLIT_MIN_CHUNKS", 2, 1 << 20, kSplitMinChunks)};
std::atomic<int64_t> g_split_calls{0};  // test_hooks::cuda_linear_split_calls
std::atomic<bool> g_split_mma{false};   // test_hooks::set_cuda_linear_split_mma: the mma.sync tiles always
// The large-row configurations (test_hooks::set_cuda_linear_large_config) run calls of at least this many
// rows that the split form does not take (lm_head, gate_up at 256 rows); TF_CUDA_LINEAR_LARGE_MIN moves it
// (benchmarks; 129: the rule before the split form).
constexpr int kLargeMinRows = 17;
std::atomic<int> g_large_min{env_choice("TF_CUDA_LINEAR_LARGE_MIN", 1, 1 << 30, kLargeMinRows)};
// Fused forms by bit (1 rms_norm_linear, 2 rms_norm_linear_glu, 4 linear_add: linear_tc_small.cuh; 8
// layer_tail: layer_tail.cu, off by default, slower on the H100; 16: linear_add's add, rms_norm_linear_glu's
// glu and linear_qkv_prep as the wgmma linear's store for calls of >= 17 rows, launch_linear_large_fused);
// off: the ops they fuse, in turn (the same bits). Default 23. TF_CUDA_FUSED_LINEAR for whole-run A/B,
// test_hooks::set_cuda_fused_linear for tests (on: 31).
std::atomic<int> g_fused{env_choice("TF_CUDA_FUSED_LINEAR", 0, 31, 23)};
std::atomic<int64_t> g_large_fused_calls{0};  // test_hooks::cuda_linear_large_fused_calls
std::atomic<bool> g_large_fused_planted{false};

// Stage columns [k0, k0 + COLS) of rows [r0, r0 + rows) of a row-major [n_rows, in_f] matrix into smem
// rows of stride LD; rows at or past n_rows and columns at or past in_f are zero-filled. The `nthreads`
// threads numbered `tid` share the copy (a block or one warp). vec: 16-byte cp.async (in_f % 8 == 0
// and 16-byte aligned rows); else element loads (the same values).
template <int COLS, int LD>
__device__ __forceinline__ void load_rows(bf16_t* s, const bf16_t* __restrict__ g, int64_t r0, int rows,
                                          int64_t n_rows, int64_t k0, int64_t in_f, bool vec, int tid,
                                          int nthreads) {
  if (vec) {
    for (int c = tid; c < rows * (COLS / 8); c += nthreads) {
      const int r = c / (COLS / 8), kc = (c % (COLS / 8)) * 8;
      const int64_t gr = r0 + r, gk = k0 + kc;
      const bool ok = gr < n_rows && gk < in_f;
      cp_async16(s + r * LD + kc, ok ? g + gr * in_f + gk : g, ok);
    }
  } else {
    for (int e = tid; e < rows * COLS; e += nthreads) {
      const int r = e / COLS, kc = e % COLS;
      const int64_t gr = r0 + r, gk = k0 + kc;
      s[r * LD + kc] = (gr < n_rows && gk < in_f) ? g[gr * in_f + gk] : bf16_t{0};
    }
  }
}

// B fragments of NT n8 tiles (columns col0 + 8b .. of a [cols][LD] smem tile, k offset kk) times the A
// fragments of MT m16 tiles, accumulated into acc. Used by both kernels: one mma per (m16, n8) per step.
template <int MT, int NT, int LD>
__device__ __forceinline__ void mma_step(float (&acc)[MT][NT][4], const uint32_t (&af)[MT][4],
                                         const bf16_t* sb, int col0, int kk, int lane, int mt_live) {
  if constexpr (NT == 1) {
    uint32_t bf[2];  // one n8 tile: rows lane % 8, k offset 8 * ((lane / 8) % 2) (lanes 16..31 unused)
    ldmatrix_x2(bf, sb + (col0 + lane % 8) * LD + kk + ((lane / 8) % 2) * 8);
#pragma unroll
    for (int a = 0; a < MT; ++a)
      if (a < mt_live) mma_bf16(acc[a][0], af[a], bf[0], bf[1]);
  } else {
#pragma unroll
    for (int b = 0; b < NT; b += 2) {
      uint32_t bf[4];  // two n8 tiles: rows (lane%8) + 8*(lane/16), k offset 8*((lane/8)%2)
      ldmatrix_x4(bf, sb + (col0 + b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kk + ((lane / 8) % 2) * 8);
#pragma unroll
      for (int a = 0; a < MT; ++a)
        if (a < mt_live) {
          mma_bf16(acc[a][b], af[a], bf[0], bf[1]);
          mma_bf16(acc[a][b + 1], af[a], bf[2], bf[3]);
        }
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int a = 0; a < MT; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
}

// ---- n <= 64: chunks in parallel across the warps of a block ------------------------------------
// BM rows (16 or 64) x BN columns (8 or 16) per block, NW warps, each warp streaming sub-tiles of SUB k
// through an S-deep ring of its own. Shared memory: the partials [NW][BM * BN] f32, then per warp S
// stages of x (xrows rows, the call's real rows up to BM) and w (BN rows), each row SUB + 8 wide.
template <int BM, int BN, int NW, int SUB, int S>
struct ChunkCfg {
  static constexpr int kThreads = NW * 32, kLd = SUB + 8, kMT = BM / 16, kNT = BN / 8;
  static constexpr int kPer = (BM * BN + kThreads - 1) / kThreads;  // folded outputs per thread
  static constexpr size_t kPartBytes = size_t{NW} * BM * BN * sizeof(float);
  __host__ __device__ static constexpr size_t stage_elems(int xrows) {
    return static_cast<size_t>(xrows + BN) * kLd;
  }
  static constexpr size_t smem(int xrows) { return kPartBytes + size_t{NW} * S * stage_elems(xrows) * 2; }
  static_assert(BM % 16 == 0 && (BN == 8 || BN % 16 == 0) && SUB % 16 == 0 && kChunk % SUB == 0 && S >= 2);
  static_assert(kPartBytes % 16 == 0);
};

// kc: the chunk length (kChunk; a multiple of SUB). xrows = min(n, BM), as the host sized the smem.
template <class Cfg, int BM, int BN, int NW, int SUB, int S, class TO>
__global__ void __launch_bounds__(Cfg::kThreads)
    linear_tc_chunks_kernel(const bf16_t* __restrict__ x, const bf16_t* __restrict__ w,
                            const bf16_t* __restrict__ bias, TO* __restrict__ out, int64_t n, int64_t in_f,
                            int64_t out_f, bool vec, int kc) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int LD = Cfg::kLd, MT = Cfg::kMT, NT = Cfg::kNT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * BM, j0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int xrows = static_cast<int>(n < BM ? n : BM);
  const int rows = static_cast<int>(n - i0 < BM ? n - i0 : BM);  // this block's real rows, <= xrows
  const int mt_live = (rows + 15) / 16;                          // m16 tiles holding real rows
  float* part = reinterpret_cast<float*>(smem_raw);
  const size_t stage_elems = Cfg::stage_elems(xrows);
  bf16_t* ring = reinterpret_cast<bf16_t*>(smem_raw + Cfg::kPartBytes) + warp * S * stage_elems;

  const int n_chunks = static_cast<int>((in_f + kc - 1) / kc), n_sub = kc / SUB;
  const int rounds = (n_chunks + NW - 1) / NW;
  // Sub-tile q of this warp: its local chunk q / n_sub (global chunk (q / n_sub) * NW + warp), part q %
  // n_sub.
  auto k_of = [&](int q) {
    const int c = (q / n_sub) * NW + warp;
    return c < n_chunks ? static_cast<int64_t>(c) * kc + static_cast<int64_t>(q % n_sub) * SUB : in_f;
  };
  auto issue = [&](int q) {
    const int64_t k0 = k_of(q);
    if (k0 < in_f) {
      bf16_t* sx = ring + (q % S) * stage_elems;
      load_rows<SUB, LD>(sx, x, i0, rows, n, k0, in_f, vec, lane, 32);
      load_rows<SUB, LD>(sx + xrows * LD, w, j0, BN, out_f, k0, in_f, vec, lane, 32);
    }
    cp_async_commit();
  };
  for (int q = 0; q < S - 1; ++q) issue(q);

  float total[Cfg::kPer];
#pragma unroll
  for (float& t : total) t = 0.0f;
  for (int r = 0; r < rounds; ++r) {
    if (r * NW + warp < n_chunks) {  // chunk r * NW + warp, from zero
      float acc[MT][NT][4];
      zero(acc);
      for (int sub = 0; sub < n_sub; ++sub) {
        const int q = r * n_sub + sub;
        cp_async_wait<S - 2>();
        __syncwarp();  // every lane's copies of sub-tile q landed; slot (q - 1) % S is no longer read
        issue(q + S - 1);
        const int64_t k0 = k_of(q);
        const bf16_t* sx = ring + (q % S) * stage_elems;
        const bf16_t* sw = sx + xrows * LD;
#pragma unroll
        for (int kk = 0; kk < SUB; kk += 16) {
          if (k0 + kk >= in_f) break;  // the same chain length in every configuration
          uint32_t af[MT][4];
#pragma unroll
          for (int a = 0; a < MT; ++a) {
            const int row = min(a * 16 + lane % 16, rows - 1);  // padding rows read a real one
            if (a < mt_live) ldmatrix_x4(af[a], sx + row * LD + kk + (lane / 16) * 8);
          }
          mma_step<MT, NT, LD>(acc, af, sw, 0, kk, lane, mt_live);
        }
      }
      const int g = lane / 4, t = lane % 4;
      float* p = part + warp * BM * BN;
#pragma unroll
      for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            p[(a * 16 + g + (c / 2) * 8) * BN + b * 8 + 2 * t + c % 2] = acc[a][b][c];
    }
    __syncthreads();
    // Fold this round's partials into the running sums, in chunk order.
#pragma unroll
    for (int m = 0; m < Cfg::kPer; ++m) {
      const int e = threadIdx.x + m * Cfg::kThreads;
      if (e >= BM * BN) break;
      for (int wi = 0; wi < NW && r * NW + wi < n_chunks; ++wi) {
        const float v = part[wi * BM * BN + e];
        total[m] = (r == 0 && wi == 0) ? v : total[m] + v;
      }
    }
    __syncthreads();  // the partials are rewritten next round
  }
  cp_async_wait<0>();

#pragma unroll
  for (int m = 0; m < Cfg::kPer; ++m) {
    const int e = threadIdx.x + m * Cfg::kThreads;
    if (e >= BM * BN) break;
    const int64_t i = i0 + e / BN, j = j0 + e % BN;
    if (e / BN >= rows || j >= out_f) continue;
    float v = total[m];
    if (bias) v += to_f(bias[j]);
    out[i * out_f + j] = from_f<TO>(v);
  }
}

template <int BM, int BN, int NW, class TO>
void launch_chunks(cudaStream_t s, const bf16_t* x, const bf16_t* w, const bf16_t* bias, TO* out, int64_t n,
                   int64_t in_f, int64_t out_f, bool vec, int kc) {
  // 16 rows: 64-wide sub-tiles, 5 deep (a whole chunk in flight per warp while it computes the previous
  // one's last sub-tile); 64 rows: x dominates the stage, so 32-wide sub-tiles, 4 deep, keep two blocks
  // per SM.
  constexpr int SUB = BM <= 16 ? 64 : 32, S = BM <= 16 ? 5 : 4;
  using Cfg = ChunkCfg<BM, BN, NW, SUB, S>;
  auto kernel = linear_tc_chunks_kernel<Cfg, BM, BN, NW, SUB, S, TO>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Cfg::smem(BM))));
  });
  TF_CHECK(kc % SUB == 0);
  const int xrows = static_cast<int>(std::min<int64_t>(n, BM));
  const dim3 grid(blocks_for(out_f, BN), blocks_for(n, BM));
  TF_CHECK(grid.y <= 65535);
  kernel<<<grid, Cfg::kThreads, Cfg::smem(xrows), s>>>(x, w, bias, out, n, in_f, out_f, vec, kc);
  TF_CUDA_LAUNCHED();
}

// ---- n > 64: tiled, chunks in sequence ----------------------------------------------------------
// BM x BN outputs per block, warps of WM x WN, k tiles of BK (kChunk is a multiple), STAGES-deep
// cp.async pipeline. The running chunk sums live in registers beside the accumulators (REG: warp tiles
// of 32 x 32, 64 floats) or in shared memory after the stages, [element][thread] (each thread reads back
// only its own: 64 x 32 warp tiles would need 128 floats and spill past 255 registers). Both keep the
// same sums in the same order: which one runs is a speed choice (test_hooks::set_cuda_linear_large_config).
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool REG = false>
struct TileCfg {
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kLd = BK + 8;  // row stride in elements: 16-byte rows land on distinct banks
  static constexpr int kStageElems = (BM + BN) * kLd;
  static constexpr size_t kTotalOffset = size_t{STAGES} * kStageElems * sizeof(bf16_t);
  static constexpr size_t kSmem = kTotalOffset + (REG ? 0 : size_t{BM} * BN * sizeof(float));
  static constexpr bool kReg = REG;
  static_assert(kTotalOffset % 16 == 0);
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0 && BM % WM == 0 && BN % WN == 0);
  static_assert(kChunk % BK == 0);
};

// part: null, or the split form's workspace (linear_split.cu): block z then runs chunk z alone and writes its
// partial p_z, unrounded and without bias, to part[(z * n + i) * out_f + j]; launch_linear_fold adds them.
template <class Cfg, int BM, int BN, int BK, int WM, int WN, int STAGES, class TO>
__global__ void __launch_bounds__(Cfg::kThreads)
    linear_tc_kernel(const bf16_t* __restrict__ x, const bf16_t* __restrict__ w,
                     const bf16_t* __restrict__ bias, TO* __restrict__ out, int64_t n, int64_t in_f,
                     int64_t out_f, bool vec, float* __restrict__ part) {
  extern __shared__ __align__(16) bf16_t smem[];
  constexpr int LD = Cfg::kLd, MT = WM / 16, NT = WN / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * BM, j0 = static_cast<int64_t>(blockIdx.x) * BN;
  // k tiles [kt0, kt1): all of k, or chunk blockIdx.z's (split form).
  const int64_t kt0 = part ? static_cast<int64_t>(blockIdx.z) * (kChunk / BK) : 0;
  const int64_t k_tiles = (in_f + BK - 1) / BK, kt1 = part ? min(k_tiles, kt0 + kChunk / BK) : k_tiles;

  float acc[MT][NT][4];
  zero(acc);
  float reg_total[Cfg::kReg ? MT : 1][Cfg::kReg ? NT : 1][4];
  float* total = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(smem) + Cfg::kTotalOffset);
  auto tot = [&](int a, int b, int c) -> float& {
    if constexpr (Cfg::kReg)
      return reg_total[a][b][c];
    else
      return total[((a * NT + b) * 4 + c) * Cfg::kThreads + threadIdx.x];
  };

  auto stage = [&](int64_t kt) {
    bf16_t* sa = smem + ((kt - kt0) % STAGES) * Cfg::kStageElems;
    bf16_t* sb = sa + BM * LD;
    if (kt < kt1) {
      load_rows<BK, LD>(sa, x, i0, BM, n, kt * BK, in_f, vec, threadIdx.x, Cfg::kThreads);
      load_rows<BK, LD>(sb, w, j0, BN, out_f, kt * BK, in_f, vec, threadIdx.x, Cfg::kThreads);
    }
    cp_async_commit();
  };
  for (int s = 0; s < STAGES - 1; ++s) stage(kt0 + s);

  for (int64_t kt = kt0; kt < kt1; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    stage(kt + STAGES - 1);
    const bf16_t* sa = smem + ((kt - kt0) % STAGES) * Cfg::kStageElems;
    const bf16_t* sb = sa + BM * LD;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      if (kt * BK + kk >= in_f) break;  // the same chain length in every configuration
      uint32_t af[MT][4];
#pragma unroll
      for (int a = 0; a < MT; ++a)
        ldmatrix_x4(af[a], sa + (wm * WM + a * 16 + lane % 16) * LD + kk + (lane / 16) * 8);
      mma_step<MT, NT, LD>(acc, af, sb, wn * WN, kk, lane, MT);
    }
    // End of a chunk (or of k): total = p_0, then total += p_c, in chunk order.
    if (((kt + 1) * BK) % kChunk == 0 || kt + 1 == k_tiles) {
      const bool first = (kt * BK) / kChunk == (kt0 * BK) / kChunk;
#pragma unroll
      for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c) tot(a, b, c) = first ? acc[a][b][c] : tot(a, b, c) + acc[a][b][c];
      zero(acc);
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int a = 0; a < MT; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t i = i0 + wm * WM + a * 16 + g + (c / 2) * 8, j = j0 + wn * WN + b * 8 + 2 * t + c % 2;
        if (i >= n || j >= out_f) continue;
        float v = tot(a, b, c);
        if (part) {
          part[(static_cast<int64_t>(blockIdx.z) * n + i) * out_f + j] = v;
          continue;
        }
        if (bias) v += to_f(bias[j]);
        out[i * out_f + j] = from_f<TO>(v);
      }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, class TO, bool REG = false>
void launch_cfg(cudaStream_t s, const bf16_t* x, const bf16_t* w, const bf16_t* bias, TO* out, int64_t n,
                int64_t in_f, int64_t out_f, bool vec, float* part = nullptr, unsigned chunks = 1) {
  using Cfg = TileCfg<BM, BN, BK, WM, WN, STAGES, REG>;
  auto kernel = linear_tc_kernel<Cfg, BM, BN, BK, WM, WN, STAGES, TO>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Cfg::kSmem)));
  });
  const dim3 grid(blocks_for(out_f, BN), blocks_for(n, BM), part ? chunks : 1);
  TF_CHECK(grid.y <= 65535 && grid.z <= 65535);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmem, s>>>(x, w, bias, out, n, in_f, out_f, vec, part);
  TF_CUDA_LAUNCHED();
}

// Whether x and w rows can be staged in 16-byte copies (load_rows' vec).
bool copies16(const bf16_t* x, const bf16_t* w, int64_t in_f) {
  return in_f % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

// Whether a call of this shape takes the split form (see the top of this file).
bool split_applies(int64_t n, int64_t in_f, int64_t out_f) {
  const int64_t n_chunks = (in_f + kChunk - 1) / kChunk;
  return n >= g_split_min.load(std::memory_order_relaxed) && n <= kSplitMaxRows &&
         n_chunks >= g_split_min_chunks.load(std::memory_order_relaxed) &&
         int64_t{blocks_for(out_f, 64)} * blocks_for(n, 64) < kSplitBelowTiles;
}

// The split form where it applies; false (nothing queued) elsewhere.
template <class TO>
bool run_split(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0), n_chunks = (in_f + kChunk - 1) / kChunk;
  if (!split_applies(n, in_f, out_f)) return false;
  float* part = linear_partials(s, n_chunks * n * out_f);
  if (!part) return false;
  const auto* xp = ptr<const bf16_t>(x);
  const auto* wp = ptr<const bf16_t>(w);
  const bool vec = copies16(xp, wp, in_f);
  TO* op = ptr<TO>(out);
  const bool wgmma_ok =
      vec && n < (int64_t{1} << 30) && in_f < (int64_t{1} << 30) && out_f < (int64_t{1} << 30);
  if (!(wgmma_ok && !g_split_mma.load(std::memory_order_relaxed) &&
        launch_linear_tc_wgmma_split(s, xp, wp, part, n, in_f, out_f)))
    launch_cfg<64, 64, 32, 32, 32, 4, TO, true>(s, xp, wp, nullptr, op, n, in_f, out_f, vec, part,
                                                static_cast<unsigned>(n_chunks));
  launch_linear_fold(s, part, static_cast<int>(n_chunks), bias ? ptr<const bf16_t>(*bias) : nullptr, op, n,
                     out_f);
  g_split_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

template <class TO>
void run_tc(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  const auto* xp = ptr<const bf16_t>(x);
  const auto* wp = ptr<const bf16_t>(w);
  const bf16_t* bp = bias ? ptr<const bf16_t>(*bias) : nullptr;
  TO* op = ptr<TO>(out);
  const bool vec = copies16(xp, wp, in_f);
  const int64_t n_chunks = (in_f + kChunk - 1) / kChunk;
  const int planted = g_planted_small_chunk.load(std::memory_order_relaxed);
  const int small = g_small_config.load(std::memory_order_relaxed);
  if (n <= 64 && small > 0 &&
      launch_linear_tc_small(s, small, x, std::span<const Tensor>(&w, 1),
                             std::span<const Tensor* const>(&bias, 1), std::span<const Tensor>(&out, 1),
                             n <= 16 && planted ? planted : kChunk))
    return;
  if (n <= 16) {
    const int kc = planted ? planted : kChunk;
    // 8 columns per block up to ~2 waves of blocks on 132 SMs (k/v/o/down: 128 blocks), 16 beyond
    // (lm_head); 8 warps where k has more than 4 chunks (down: 12 chunks in 2 rounds instead of 3).
    const bool wide = out_f >= 16 * 264, deep = n_chunks > 4;
    if (wide && deep)
      launch_chunks<16, 16, 8>(s, xp, wp, bp, op, n, in_f, out_f, vec, kc);
    else if (wide)
      launch_chunks<16, 16, 4>(s, xp, wp, bp, op, n, in_f, out_f, vec, kc);
    else if (deep)
      launch_chunks<16, 8, 8>(s, xp, wp, bp, op, n, in_f, out_f, vec, kc);
    else
      launch_chunks<16, 8, 4>(s, xp, wp, bp, op, n, in_f, out_f, vec, kc);
  } else if (n <= 64) {
    launch_chunks<64, 16, 4>(s, xp, wp, bp, op, n, in_f, out_f, vec, kChunk);
  } else if (n <= 128) {
    launch_cfg<64, 64, 32, 32, 32, 4, TO, true>(s, xp, wp, bp, op, n, in_f, out_f, vec);
  } else if (g_large_config.load(std::memory_order_relaxed) == 1) {  // (2.. where they apply: above)
    // 8 warps of 32 x 32 with the sums in registers: 61 KB of stages, two blocks per SM. Measured
    // slower on the H200 (61-83 TFLOP/s against 70-116 for the default: bench/linear/linear_bench.cpp).
    launch_cfg<128, 64, 32, 32, 32, 4, TO, true>(s, xp, wp, bp, op, n, in_f, out_f, vec);
  } else {
    launch_cfg<128, 128, 32, 64, 32, 4, TO, false>(s, xp, wp, bp, op, n, in_f, out_f, vec);
  }
}

}  // namespace

bool launch_linear_tc_many(cudaStream_t s, const Tensor& x, std::span<const Tensor> w,
                           std::span<const Tensor> out) {
  const int64_t n = x.dim(0);
  const int planted = g_planted_small_chunk.load(std::memory_order_relaxed);
  const int small = g_small_config.load(std::memory_order_relaxed);
  if (n > 64 || small <= 0 || w.size() > 4) return false;
  if (n >= g_split_min.load(std::memory_order_relaxed)) return false;  // separate calls: the split form
  for (const Tensor& wi : w)
    if (!linear_tc_applies(x, wi)) return false;
  const std::array<const Tensor*, 4> no_bias{};
  return launch_linear_tc_small(s, small, x, w, std::span<const Tensor* const>(no_bias.data(), w.size()), out,
                                n <= 16 && planted ? planted : kChunk);
}

bool launch_linear_fused(cudaStream_t s, const SmallFused& f, const Tensor& x, std::span<const Tensor> w,
                         const Tensor* bias, std::span<const Tensor> out) {
  const int planted = g_planted_small_chunk.load(std::memory_order_relaxed);
  const int small = g_small_config.load(std::memory_order_relaxed);
  const int bit = f.add ? 4 : f.glu ? 2 : 1;
  if (small <= 0 || x.dim(0) > 16 || (g_fused.load(std::memory_order_relaxed) & bit) == 0) return false;
  return launch_linear_tc_small_fused(s, small, f, x, w, bias, out, planted ? planted : kChunk);
}

bool large_fused_on() { return (g_fused.load(std::memory_order_relaxed) & 16) != 0; }
int large_fused_config(const Tensor& x, const Tensor& w) {
  const int64_t n = x.dim(0), in_f = x.dim(1), w_rows = w.dim(0);
  const int large = g_large_config.load(std::memory_order_relaxed);
  if (!large_fused_on() || large < 10 || n < std::max(17, g_large_min.load(std::memory_order_relaxed)) ||
      split_applies(n, in_f, w_rows) || x.dtype != DType::BF16 || w.dtype != DType::BF16 ||
      !copies16(ptr<const bf16_t>(x), ptr<const bf16_t>(w), in_f) || n >= (int64_t{1} << 30) ||
      in_f >= (int64_t{1} << 30) || w_rows >= (int64_t{1} << 30))
    return 0;
  return large;
}
bool large_fused_planted() { return g_large_fused_planted.load(std::memory_order_relaxed); }
void large_fused_launched() { g_large_fused_calls.fetch_add(1, std::memory_order_relaxed); }

bool layer_tail_on() { return (g_fused.load() & 8) && g_small_config.load() > 0; }
bool launch_layer_tail_fused(cudaStream_t s, unsigned* bar, const Tensor& x, const Backend::TailWeights& w,
                             const Tensor& mid, const Tensor& h) {
  const int planted = g_planted_small_chunk.load(std::memory_order_relaxed);
  return layer_tail_on() && launch_layer_tail(s, bar, x, w, mid, h, planted ? planted : kChunk, -1);
}

bool linear_tc_applies(const Tensor& x, const Tensor& w) {
  return x.dtype == DType::BF16 && w.dtype == DType::BF16;
}

void launch_linear_tc(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out) {
  TF_CHECK(linear_tc_applies(x, w));
  if (out.dtype == DType::BF16 ? run_split<bf16_t>(s, x, w, bias, out) : run_split<float>(s, x, w, bias, out))
    return;
  const int large = g_large_config.load(std::memory_order_relaxed);
  if (x.dim(0) >= g_large_min.load(std::memory_order_relaxed) && large >= linear_tc_large_first() &&
      launch_linear_tc_large(s, large, x, w, bias, out))
    return;
  if (out.dtype == DType::BF16)
    run_tc<bf16_t>(s, x, w, bias, out);
  else
    run_tc<float>(s, x, w, bias, out);
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_fused_linear(bool on) {
  tf::cuda::g_fused.store(on ? 31 : 0, std::memory_order_relaxed);
  return true;
}
int64_t cuda_linear_large_fused_calls() {
  return tf::cuda::g_large_fused_calls.load(std::memory_order_relaxed);
}
bool set_cuda_linear_large_fused_planted(bool on) {
  tf::cuda::g_large_fused_planted.store(on, std::memory_order_relaxed);
  return true;
}
bool set_cuda_linear_large_config(int which) {
  TF_CHECK(which >= 0 && which < tf::cuda::linear_tc_large_end());
  tf::cuda::g_large_config.store(which, std::memory_order_relaxed);
  return true;
}
int cuda_linear_large_configs() { return tf::cuda::linear_tc_large_end(); }
int cuda_linear_large_default() { return tf::cuda::kDefaultLargeConfig; }
const char* cuda_linear_large_config_name(int which) {
  if (which == 0) return "128x128 k32 s4 8w 64x32 smem (padded)";
  if (which == 1) return "128x64 k32 s4 8w 32x32 reg (padded)";
  return tf::cuda::linear_tc_large_name(which);
}
bool set_cuda_linear_small_config(int which) {
  TF_CHECK(which >= 0 && which <= tf::cuda::linear_tc_small_variants());
  tf::cuda::g_small_config.store(which, std::memory_order_relaxed);
  return true;
}
int cuda_linear_small_configs() { return 1 + tf::cuda::linear_tc_small_variants(); }
bool set_cuda_linear_split_min_rows(int rows) {
  TF_CHECK(rows >= 1);
  tf::cuda::g_split_min.store(rows, std::memory_order_relaxed);
  return true;
}
int cuda_linear_split_min_rows_default() { return tf::cuda::kSplitMinRows; }
int cuda_linear_split_min_rows() { return tf::cuda::g_split_min.load(std::memory_order_relaxed); }
int64_t cuda_linear_split_calls() { return tf::cuda::g_split_calls.load(std::memory_order_relaxed); }
bool set_cuda_linear_split_min_chunks(int chunks) {
  TF_CHECK(chunks >= 2);
  tf::cuda::g_split_min_chunks.store(chunks, std::memory_order_relaxed);
  return true;
}
int cuda_linear_split_min_chunks_default() { return tf::cuda::kSplitMinChunks; }
bool set_cuda_linear_split_mma(bool on) {
  tf::cuda::g_split_mma.store(on, std::memory_order_relaxed);
  return true;
}
int cuda_linear_small_default() { return tf::cuda::kDefaultSmallConfig; }
const char* cuda_linear_small_config_name(int which) {
  return which == 0 ? "chunks (linear_tc.cu)" : tf::cuda::linear_tc_small_name(which);
}
bool set_cuda_linear_small_rows_chunk(int kc) {
  TF_CHECK(kc == 0 || (kc > 0 && kc % 64 == 0));
  tf::cuda::g_planted_small_chunk.store(kc, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
