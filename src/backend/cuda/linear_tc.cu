// linear on tensor cores (bf16 x and w): out[n, out_f] = rnd(x[n, in_f] · w[out_f, in_f]^T + bias).
//
// Contract (backend/ops.h `linear`, the CUDA tolerance of tools/cuda_check/README.md): each output
// element is the f32 accumulation of mma.sync m16n8k16 over k in increasing 16-wide chunks (one
// accumulator chain, no split-K), + bias in f32, then one rounding. It differs from the CPU
// reference's 8-lane f32 dot only in the accumulation order inside the tensor core, so a bf16 output
// is the CPU's or one ulp away (where the two f32 sums straddle a rounding boundary).
//
// Batch invariance: the chain of an element is fixed by in_f alone (chunks past in_f are skipped, not
// multiplied by zero), and every tile configuration below runs the same chain, so a row's bits are
// the same whether the call has 1, 8, 37 or 9,000 rows (mma.cuh explains why the instruction allows
// it). The configuration is picked by n only for speed.
//
// Shapes: x [n, in_f] bf16, w [out_f, in_f] bf16, bias [out_f] bf16 or null, out [n, out_f] bf16/f32.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"

namespace tf::cuda {
namespace {

using namespace mma;

// BM x BN outputs per block, warps of WM x WN, k tiles of BK, STAGES-deep cp.async pipeline.
template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct TileCfg {
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN, kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kLd = BK + 8;  // row stride in elements: 16-byte rows land on distinct banks
  static constexpr int kStageElems = (BM + BN) * kLd;
  static constexpr size_t kSmem = size_t{STAGES} * kStageElems * sizeof(bf16_t);
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0 && BM % WM == 0 && BN % WN == 0);
};

// Stage one BK-wide k tile of rows [r0, r0 + rows) of a [n_rows, in_f] matrix into smem [rows][kLd].
// vec: 16-byte cp.async (in_f % 8 == 0 and 16-byte aligned rows); else element loads (same values).
template <int ROWS, int BK, int LD, int THREADS>
__device__ __forceinline__ void load_tile(bf16_t* s, const bf16_t* __restrict__ g, int64_t r0, int64_t n_rows,
                                          int64_t k0, int64_t in_f, bool vec) {
  constexpr int kChunks = ROWS * BK / 8;
  if (vec) {
    for (int c = threadIdx.x; c < kChunks; c += THREADS) {
      const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
      const int64_t gr = r0 + r, gk = k0 + kc;
      const bool ok = gr < n_rows && gk < in_f;
      cp_async16(s + r * LD + kc, ok ? g + gr * in_f + gk : g, ok);
    }
  } else {
    for (int e = threadIdx.x; e < ROWS * BK; e += THREADS) {
      const int r = e / BK, kc = e % BK;
      const int64_t gr = r0 + r, gk = k0 + kc;
      s[r * LD + kc] = (gr < n_rows && gk < in_f) ? g[gr * in_f + gk] : bf16_t{0};
    }
  }
}

template <class Cfg, int BM, int BN, int BK, int WM, int WN, int STAGES, class TO>
__global__ void __launch_bounds__(Cfg::kThreads)
    linear_tc_kernel(const bf16_t* __restrict__ x, const bf16_t* __restrict__ w,
                     const bf16_t* __restrict__ bias, TO* __restrict__ out, int64_t n, int64_t in_f,
                     int64_t out_f, bool vec) {
  extern __shared__ __align__(16) bf16_t smem[];
  constexpr int LD = Cfg::kLd, MT = WM / 16, NT = WN / 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / Cfg::kWarpsN, wn = warp % Cfg::kWarpsN;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * BM, j0 = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t k_tiles = (in_f + BK - 1) / BK;

  float acc[MT][NT][4];
#pragma unroll
  for (int a = 0; a < MT; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  auto stage = [&](int64_t kt) {
    bf16_t* sa = smem + (kt % STAGES) * Cfg::kStageElems;
    bf16_t* sb = sa + BM * LD;
    if (kt < k_tiles) {
      load_tile<BM, BK, LD, Cfg::kThreads>(sa, x, i0, n, kt * BK, in_f, vec);
      load_tile<BN, BK, LD, Cfg::kThreads>(sb, w, j0, out_f, kt * BK, in_f, vec);
    }
    cp_async_commit();
  };
  for (int s = 0; s < STAGES - 1; ++s) stage(s);

  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    stage(kt + STAGES - 1);
    const bf16_t* sa = smem + (kt % STAGES) * Cfg::kStageElems;
    const bf16_t* sb = sa + BM * LD;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      if (kt * BK + kk >= in_f) break;  // the same chain length in every configuration
      uint32_t af[MT][4];
#pragma unroll
      for (int a = 0; a < MT; ++a)
        ldmatrix_x4(af[a], sa + (wm * WM + a * 16 + lane % 16) * LD + kk + (lane / 16) * 8);
#pragma unroll
      for (int b = 0; b < NT; b += 2) {
        uint32_t bf[4];  // two n8 tiles: rows (lane%8) + 8*(lane/16), k offset 8*((lane/8)%2)
        ldmatrix_x4(bf,
                    sb + (wn * WN + b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kk + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int a = 0; a < MT; ++a) {
          mma_bf16(acc[a][b], af[a], bf[0], bf[1]);
          mma_bf16(acc[a][b + 1], af[a], bf[2], bf[3]);
        }
      }
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
        float v = acc[a][b][c];
        if (bias) v += to_f(bias[j]);
        out[i * out_f + j] = from_f<TO>(v);
      }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, class TO>
void launch_cfg(cudaStream_t s, const bf16_t* x, const bf16_t* w, const bf16_t* bias, TO* out, int64_t n,
                int64_t in_f, int64_t out_f, bool vec) {
  using Cfg = TileCfg<BM, BN, BK, WM, WN, STAGES>;
  auto kernel = linear_tc_kernel<Cfg, BM, BN, BK, WM, WN, STAGES, TO>;
  static const bool attr = [&] {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(Cfg::kSmem)));
    return true;
  }();
  (void)attr;
  const dim3 grid(blocks_for(out_f, BN), blocks_for(n, BM));
  TF_CHECK(grid.y <= 65535);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmem, s>>>(x, w, bias, out, n, in_f, out_f, vec);
  TF_CUDA_LAUNCHED();
}

template <class TO>
void run_tc(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  const auto* xp = ptr<const bf16_t>(x);
  const auto* wp = ptr<const bf16_t>(w);
  const bf16_t* bp = bias ? ptr<const bf16_t>(*bias) : nullptr;
  const bool vec =
      in_f % 8 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(wp) % 16 == 0;
  // Decode and draft verification: one warp per 16 columns, the weights streamed once in 256-wide k
  // tiles (BK 64 -> 256 took the 1B's batch-1 decode from 144 to 160 tok/s on the H200).
  if (n <= 16)
    launch_cfg<16, 16, 256, 16, 16, 4>(s, xp, wp, bp, ptr<TO>(out), n, in_f, out_f, vec);
  else if (n <= 128)
    launch_cfg<64, 64, 32, 32, 32, 4>(s, xp, wp, bp, ptr<TO>(out), n, in_f, out_f, vec);
  else
    launch_cfg<128, 128, 32, 64, 32, 4>(s, xp, wp, bp, ptr<TO>(out), n, in_f, out_f, vec);
}

}  // namespace

bool linear_tc_applies(const Tensor& x, const Tensor& w) {
  return x.dtype == DType::BF16 && w.dtype == DType::BF16;
}

void launch_linear_tc(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out) {
  TF_CHECK(linear_tc_applies(x, w));
  if (out.dtype == DType::BF16)
    run_tc<bf16_t>(s, x, w, bias, out);
  else
    run_tc<float>(s, x, w, bias, out);
}

}  // namespace tf::cuda
