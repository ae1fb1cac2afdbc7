// The large-row (n >= 17, where the split form does not run) candidate configurations of the tensor-core
// linear, 2.. of test_hooks::set_cuda_linear_large_config (0 and 1 stay in linear_tc.cu). Same arithmetic as
// every configuration there (linear_tc.cu, top): k in fixed 256-wide chunks, each chunk's partial an f32
// mma.sync m16n8k16 chain over its k in increasing 16-wide steps from zero (steps at or past in_f
// skipped), partials added in chunk order, + bias in f32, one rounding. So the bits equal config 0's
// for every row count; only the tiling, the pipeline and the shared-memory layout differ:
// - XOR-swizzled stages instead of padded rows: a 16-byte chunk c of smem row r sits at chunk
//   c ^ swz(r) (BK 64: 128-byte rows, swz = r & 7; BK 32: 64-byte rows, swz = (r >> 1) & 3), so the 8
//   rows of every ldmatrix 8x8 matrix and every warp's cp.async writes hit distinct banks, with no
//   padding (more stages fit).
// - Each thread copies fixed (row, chunk) slots of every stage (its global pointers computed once).
// - Full k tiles run an unrolled, branch-free chain; only the last, partial tile checks in_f.
// - The running chunk sums: in registers beside the accumulators (REG, warp tiles of 64 x 32: 64 + 64
//   floats) or in shared memory after the stages as one float4 per (m16, n8) fragment and thread
//   (warp tiles of 64 x 64; 128 accumulators leave no room for 128 more registers), read and written
//   only by their own thread, once per 256 of k.
// - Epilogue: bias, then the two adjacent columns of a fragment stored as one 4-byte (bf16) or 8-byte
//   (f32) store where out_f is even (linear_epilogue.cuh).
// Only the 16-byte copy path (in_f % 8 == 0, 16-byte aligned x and w): elsewhere the caller runs config 0.
//
// Shapes: x [n, in_f] bf16, w [out_f, in_f] bf16, bias [out_f] bf16 or null, out [n, out_f] bf16/f32.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/linear_epilogue.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"

#include <iterator>

namespace tf::cuda {

// Configurations 10 .. 13 (linear_tc_wgmma_sm90a.cu, its only caller is launch_linear_tc_large below, which
// has checked the 16-byte copies and the int index limits): false (nothing queued) on a device other than
// compute capability 9.0.
bool launch_linear_tc_wgmma(cudaStream_t s, int which, const bf16_t* x, const bf16_t* w, const bf16_t* bias,
                            void* out, DType out_dtype, int64_t n, int64_t in_f, int64_t out_f);

namespace {

using namespace mma;

constexpr int kChunk = 256;  // the contract's k chunk (linear_tc.cu)

// BM x BN outputs per block, k tiles of BK, warps of WM x WN, STAGES-deep cp.async ring; REG: chunk
// sums in registers (else in shared memory); MINB: blocks per SM the launch bounds ask for.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, bool REG_, int MINB_>
struct LargeCfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool REG = REG_;
  static constexpr int kWarpsN = BN / WN, kThreads = (BM / WM) * kWarpsN * 32;
  static constexpr int kMT = WM / 16, kNT = WN / 8;
  static constexpr int kCpr = BK / 8;                   // 16-byte chunks per smem row
  static constexpr int kRowsPerPass = kThreads / kCpr;  // rows one pass of the block's copies covers
  static constexpr int kAPasses = BM / kRowsPerPass, kBPasses = BN / kRowsPerPass;
  static constexpr int kStageElems = (BM + BN) * BK;
  static constexpr size_t kStageBytes = size_t{STAGES} * kStageElems * sizeof(bf16_t);
  static constexpr size_t kSmem = kStageBytes + (REG ? 0 : size_t{BM} * BN * sizeof(float));
  static_assert(BK == 32 || BK == 64);
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BM % WM == 0 && BN % WN == 0 && kChunk % BK == 0);
  // A thread's rows are tid / kCpr + p * kRowsPerPass: a multiple of 8 apart, so one swizzle for all.
  static_assert(kThreads % kCpr == 0 && kRowsPerPass % 8 == 0);
  static_assert(BM % kRowsPerPass == 0 && BN % kRowsPerPass == 0);
  static_assert(kSmem <= 232448, "more than a block's shared memory");
  static_assert(kStageBytes % 16 == 0);
};

template <int BK>
__device__ __forceinline__ int swz(int row) {
  if constexpr (BK == 64)
    return row & 7;
  else
    return (row >> 1) & 3;
}

template <class C, class TO>
__global__ void __launch_bounds__(C::kThreads, C::MINB)
    linear_tc_large_kernel(const bf16_t* __restrict__ x, const bf16_t* __restrict__ w,
                           const bf16_t* __restrict__ bias, TO* __restrict__ out, int n, int in_f, int out_f,
                           bool pair_store) {
  constexpr int BM = C::BM, BN = C::BN, BK = C::BK, WM = C::WM, WN = C::WN, STAGES = C::STAGES;
  constexpr int MT = C::kMT, NT = C::kNT, RPP = C::kRowsPerPass;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16_t* smem = reinterpret_cast<bf16_t*>(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  const int i0 = static_cast<int>(blockIdx.y) * BM, j0 = static_cast<int>(blockIdx.x) * BN;
  const int k_tiles = (in_f + BK - 1) / BK;

  // This thread's copy slots: rows ld_row + p * RPP of the A (x) and B (w) tiles, chunk ld_ch.
  const int ld_row = tid / C::kCpr, ld_ch = tid % C::kCpr;
  const int ld_dst = ld_row * BK + (ld_ch ^ swz<BK>(ld_row)) * 8;  // + p * RPP * BK
  const bf16_t* ga = x + (static_cast<int64_t>(i0) + ld_row) * in_f + ld_ch * 8;
  const bf16_t* gb = w + (static_cast<int64_t>(j0) + ld_row) * in_f + ld_ch * 8;
  const int a_left = n - i0 - ld_row, b_left = out_f - j0 - ld_row;  // pass p is a real row iff p*RPP < left
  const int64_t pass_stride = static_cast<int64_t>(RPP) * in_f;

  auto stage = [&](int kt) {
    if (kt < k_tiles) {
      bf16_t* sa = smem + (kt % STAGES) * C::kStageElems;
      bf16_t* sb = sa + BM * BK;
      const int k0 = kt * BK;
      const bool kok = k0 + ld_ch * 8 < in_f;  // in_f % 8 == 0: a chunk is wholly in or out
#pragma unroll
      for (int p = 0; p < C::kAPasses; ++p) {
        const bool ok = kok && p * RPP < a_left;
        cp_async16(sa + ld_dst + p * RPP * BK, ok ? ga + p * pass_stride + k0 : x, ok);
      }
#pragma unroll
      for (int p = 0; p < C::kBPasses; ++p) {
        const bool ok = kok && p * RPP < b_left;
        cp_async16(sb + ld_dst + p * RPP * BK, ok ? gb + p * pass_stride + k0 : w, ok);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) stage(s);

  // ldmatrix lanes. A x4: row lane % 16 of the m16 tile, chunk +lane / 16. B x4 (two n8 tiles): row
  // lane % 8 + 8 (lane / 16), chunk +(lane / 8) % 2. Tile bases are multiples of 16 (8) rows, so the
  // swizzle is the lane's own constant.
  const int a_row = wm * WM + lane % 16, a_sw = swz<BK>(a_row), a_hi = lane / 16;
  const int b_row = wn * WN + lane % 8 + (lane / 16) * 8, b_sw = swz<BK>(b_row), b_hi = (lane / 8) % 2;

  float acc[MT][NT][4];
#pragma unroll
  for (int a = 0; a < MT; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
  // REG: the sums start at -0.0f, the exact identity of f32 addition (-0 + p = p bit for bit for every
  // p but a NaN, whose payload the add may make canonical: a NaN output stays NaN, its payload bits
  // may differ from config 0's where in_f <= 256), so total = p_0 after the first chunk, no branch.
  float reg_tot[C::REG ? MT : 1][C::REG ? NT : 1][4];
#pragma unroll
  for (int a = 0; a < (C::REG ? MT : 1); ++a)
#pragma unroll
    for (int b = 0; b < (C::REG ? NT : 1); ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) reg_tot[a][b][c] = -0.0f;
  float4* smem_tot = reinterpret_cast<float4*>(smem_raw + C::kStageBytes);  // [MT*NT][threads]

  auto step = [&](const bf16_t* sa, const bf16_t* sb, int kk) {  // one 16-wide k step of the chain
    uint32_t af[MT][4];
#pragma unroll
    for (int a = 0; a < MT; ++a)
      ldmatrix_x4(af[a], sa + (a_row + a * 16) * BK + ((kk / 8 + a_hi) ^ a_sw) * 8);
#pragma unroll
    for (int b = 0; b < NT; b += 2) {
      uint32_t bf[4];
      ldmatrix_x4(bf, sb + (b_row + b * 8) * BK + ((kk / 8 + b_hi) ^ b_sw) * 8);
#pragma unroll
      for (int a = 0; a < MT; ++a) {
        mma_bf16(acc[a][b], af[a], bf[0], bf[1]);
        mma_bf16(acc[a][b + 1], af[a], bf[2], bf[3]);
      }
    }
  };

  int in_chunk = 0;  // k tiles of the current chunk done
  bool first = true;
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile kt landed for every thread; slot (kt - 1) % STAGES is no longer read
    stage(kt + STAGES - 1);
    const bf16_t* sa = smem + (kt % STAGES) * C::kStageElems;
    const bf16_t* sb = sa + BM * BK;
    const int live = in_f - kt * BK;  // k left from this tile's start
    if (live >= BK) {
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) step(sa, sb, kk);
    } else {
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16)
        if (kk < live) step(sa, sb, kk);  // the same chain length in every configuration
    }
    // End of a chunk (or of k): total = p_0, then total += p_c, in chunk order; the next chain from 0.
    if (++in_chunk == kChunk / BK || kt + 1 == k_tiles) {
      in_chunk = 0;
#pragma unroll
      for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b) {
          if constexpr (C::REG) {
#pragma unroll
            for (int c = 0; c < 4; ++c) reg_tot[a][b][c] = reg_tot[a][b][c] + acc[a][b][c];
          } else {
            float4& slot = smem_tot[(a * NT + b) * C::kThreads + tid];
            if (first) {
              slot = make_float4(acc[a][b][0], acc[a][b][1], acc[a][b][2], acc[a][b][3]);
            } else {
              float4 t = slot;
              t.x = t.x + acc[a][b][0];
              t.y = t.y + acc[a][b][1];
              t.z = t.z + acc[a][b][2];
              t.w = t.w + acc[a][b][3];
              slot = t;
            }
          }
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
        }
      first = false;
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int a = 0; a < MT; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b) {
      float v[4];
      if constexpr (C::REG) {
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] = reg_tot[a][b][c];
      } else {
        const float4 s = smem_tot[(a * NT + b) * C::kThreads + tid];
        v[0] = s.x, v[1] = s.y, v[2] = s.z, v[3] = s.w;
      }
      store_fragment(out, bias, v, i0 + wm * WM + a * 16 + g, j0 + wn * WN + b * 8 + 2 * t, n, out_f,
                     pair_store);
    }
}

template <class C, class TO>
void launch_large(cudaStream_t s, const bf16_t* x, const bf16_t* w, const bf16_t* bias, TO* out, int64_t n,
                  int64_t in_f, int64_t out_f) {
  auto kernel = linear_tc_large_kernel<C, TO>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::kSmem)));
  });
  const dim3 grid(blocks_for(out_f, C::BN), blocks_for(n, C::BM));
  TF_CHECK(grid.y <= 65535);
  const bool pair = out_f % 2 == 0 && reinterpret_cast<uintptr_t>(out) % (2 * sizeof(TO)) == 0;
  kernel<<<grid, C::kThreads, C::kSmem, s>>>(x, w, bias, out, static_cast<int>(n), static_cast<int>(in_f),
                                             static_cast<int>(out_f), pair);
  TF_CUDA_LAUNCHED();
}

// The candidates (index = config - 2). Shared memory per block; blocks per SM where it and the
// registers allow; warps.
//   2: 128 x 128, BK 64, 3 stages, 8 warps of 64 x 32, sums in registers      (96 KB, 1 block)
//   3: 128 x 128, BK 32, 3 stages, 4 warps of 64 x 64, sums in shared memory  (112 KB, 2 blocks)
//   4: 128 x 256, BK 32, 4 stages, 8 warps of 64 x 64, sums in shared memory  (224 KB, 1 block)
//   5: 256 x 128, BK 32, 4 stages, 8 warps of 64 x 64, sums in shared memory  (224 KB, 1 block)
//   6: 128 x 128, BK 64, 4 stages, 4 warps of 64 x 64, sums in shared memory  (192 KB, 1 block)
//   7: 128 x 64,  BK 64, 4 stages, 4 warps of 64 x 32, sums in registers      (96 KB, 2 blocks)
//   8: 128 x 128, BK 32, 4 stages, 8 warps of 64 x 32, sums in registers      (64 KB, 1 block)
//   9: 64 x 128,  BK 64, 3 stages, 4 warps of 32 x 64, sums in registers      (72 KB, 2 blocks)
//      (twice the blocks of 128 x 128: fewer idle SMs in the last wave of the 2,333-row prefill)
//  10: 128 x 128, BK 64, 5 stages, 2 warpgroups of wgmma m64 x n128 (linear_tc_wgmma_sm90a.cu; 161 KB)
//  11: 128 x 64,  BK 64, 4 stages, 2 warpgroups of wgmma m64 x n64 (the same file; 97 KB, 2 blocks)
//  12, 13: 10 and 11 with two accumulator sets taking chunks in turn (13: 6 stages, 1 block; not yet run)
//  (10 and 11 where the device is compute capability 9.0, else 7: the same bits)
using Cand2 = LargeCfg<128, 128, 64, 64, 32, 3, true, 1>;
using Cand3 = LargeCfg<128, 128, 32, 64, 64, 3, false, 2>;
using Cand4 = LargeCfg<128, 256, 32, 64, 64, 4, false, 1>;
using Cand5 = LargeCfg<256, 128, 32, 64, 64, 4, false, 1>;
using Cand6 = LargeCfg<128, 128, 64, 64, 64, 4, false, 1>;
using Cand7 = LargeCfg<128, 64, 64, 64, 32, 4, true, 2>;
using Cand8 = LargeCfg<128, 128, 32, 64, 32, 4, true, 1>;
using Cand9 = LargeCfg<64, 128, 64, 32, 64, 3, true, 2>;

constexpr const char* kNames[] = {
    "128x128 k64 s3 8w 64x32 reg",  "128x128 k32 s3 4w 64x64 smem",  "128x256 k32 s4 8w 64x64 smem",
    "256x128 k32 s4 8w 64x64 smem", "128x128 k64 s4 4w 64x64 smem",  "128x64 k64 s4 4w 64x32 reg",
    "128x128 k32 s4 8w 64x32 reg",  "64x128 k64 s3 4w 32x64 reg",    "128x128 k64 s5 2wg wgmma reg",
    "128x64 k64 s4 2wg wgmma reg",  "128x128 k64 s5 2wg wgmma 2acc", "128x64 k64 s6 2wg wgmma 2acc"};
constexpr int kWgmmaFirst = 10;  // 10 .. 13: launched by linear_tc_wgmma_sm90a.cu
constexpr int kMmaFallback = 7;  // where they do not apply: the fastest mma.sync form (the same bits)

template <class TO>
void run_large(cudaStream_t s, int which, const bf16_t* x, const bf16_t* w, const bf16_t* b, TO* o, int64_t n,
               int64_t in_f, int64_t out_f) {
  switch (which) {
    case 2:
      return launch_large<Cand2>(s, x, w, b, o, n, in_f, out_f);
    case 3:
      return launch_large<Cand3>(s, x, w, b, o, n, in_f, out_f);
    case 4:
      return launch_large<Cand4>(s, x, w, b, o, n, in_f, out_f);
    case 5:
      return launch_large<Cand5>(s, x, w, b, o, n, in_f, out_f);
    case 6:
      return launch_large<Cand6>(s, x, w, b, o, n, in_f, out_f);
    case 7:
      return launch_large<Cand7>(s, x, w, b, o, n, in_f, out_f);
    case 8:
      return launch_large<Cand8>(s, x, w, b, o, n, in_f, out_f);
    case 9:
      return launch_large<Cand9>(s, x, w, b, o, n, in_f, out_f);
    default:
      TF_CHECK(false && "unknown large linear configuration");
  }
}

}  // namespace

int linear_tc_large_first() { return 2; }
int linear_tc_large_end() { return 2 + static_cast<int>(std::size(kNames)); }
const char* linear_tc_large_name(int which) {
  return which >= 2 && which < linear_tc_large_end() ? kNames[which - 2] : "";
}

bool launch_linear_tc_large(cudaStream_t s, int which, const Tensor& x, const Tensor& w, const Tensor* bias,
                            const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = w.dim(0);
  const auto* xp = ptr<const bf16_t>(x);
  const auto* wp = ptr<const bf16_t>(w);
  const bool vec =
      in_f % 8 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(wp) % 16 == 0;
  // int indices inside: every row, column and k offset fits (checked), global offsets are 64-bit.
  if (!vec || n >= (int64_t{1} << 30) || in_f >= (int64_t{1} << 30) || out_f >= (int64_t{1} << 30))
    return false;
  const bf16_t* bp = bias ? ptr<const bf16_t>(*bias) : nullptr;
  if (which >= kWgmmaFirst) {
    if (launch_linear_tc_wgmma(s, which, xp, wp, bp, out.data, out.dtype, n, in_f, out_f)) return true;
    which = kMmaFallback;
  }
  if (out.dtype == DType::BF16)
    run_large<bf16_t>(s, which, xp, wp, bp, ptr<bf16_t>(out), n, in_f, out_f);
  else
    run_large<float>(s, which, xp, wp, bp, ptr<float>(out), n, in_f, out_f);
  return true;
}

}  // namespace tf::cuda
