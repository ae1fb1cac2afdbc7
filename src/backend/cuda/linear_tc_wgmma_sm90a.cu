// linear on Hopper's warpgroup tensor-core instruction (wgmma.mma_async, sm_90a): configurations 10 and 11
// (the default from 17 rows where the split form does not run) of test_hooks::set_cuda_linear_large_config,
// the same arithmetic as every configuration of linear_tc.cu (its top): k in fixed 256-wide chunks, each
// chunk's partial an f32 chain over its k in increasing 16-wide steps from zero (steps at or past in_f
// skipped), partials added in chunk order from -0.0f (linear_tc_large.cu, REG), + bias in f32, one rounding.
// The chain's k16 step rounds as mma.sync m16n8k16's does (both take 16 products and the running f32 sum per
// element): the contract (CudaContract.BatchInvarianceLinearLargeConfigs) and bench/linear compare the bits
// with configuration 0's, equal on every shape measured on the H200.
//
// Block: 128 x BN outputs (BN 128 or 64), two warpgroups of m64 x BN (warpgroup g: rows 64g..64g+63), k tiles
// of 64 (one 128-byte row per operand row) in a STAGES-deep cp.async ring. The stages use the 128-byte
// swizzle that wgmma's shared-memory descriptors read: 16-byte chunk c of row r at chunk c ^ (r % 8), tiles
// 1024-byte aligned (8 rows x 128 bytes per swizzle atom; the descriptor's stride between 8-row groups is
// 1024). A tile's four k16 steps advance the descriptors' start address by 32 bytes. Per tile: wait for its
// copies, make them visible to the async proxy, barrier, queue the copy of tile kt + STAGES - 2 into the slot
// tile kt - 2 used (both warpgroups waited for that tile's wgmma before the barrier), issue the tile's four
// wgmma, keep one group in flight (wait 1) except at a chunk's end (wait 0, then sum += acc, acc = 0).
//
// Fused epilogues (launch_linear_tc_wgmma_epi; linear_tc.cu launch_linear_large_fused, configurations 10 and
// 11): kAdd (Backend::linear_add): out is the residual stream h [n, out_f], h = rnd(h + rnd(sum + bias)) in
// place; kGlu (the glu of Backend::rms_norm_linear_glu): w is gate_up [2 out_f, in_f], a block's BN weight
// rows are BN / 2 gate rows then the same BN / 2 up rows (copy passes p < half from rows j, the others from
// rows out_f + j), so a thread holds each gate column's up column 8 x BN / 16 columns on; out [n, out_f] =
// rnd(silu(rnd(gate)) * rnd(up)) (act.cu's statement); kQkv (Backend::linear_qkv_prep, head_dim 64 rotated
// whole): the output's 64-column groups are heads [q | k | v], a thread's fragments q and q + 4 of a group
// hold the RoPE pairs (j, j + 32), stored rotated (qkv_prep.cu's rope_lo / rope_hi of the rounded values)
// into q_out / k_out, or copied into v_out. Every column's sum is the plain kernel's, so the bits are the two
// ops' in turn. Not yet run on a GPU (twenty-fifth session: written without device time).
//
// Shapes: x [n, in_f] bf16, w [out_f, in_f] bf16, bias [out_f] bf16 or null, out [n, out_f] bf16/f32;
// in_f % 8 == 0 and 16-byte aligned x, w (else the caller runs another configuration). Built for sm_90a only
// (src/CMakeLists.txt: *_sm90a.cu), used only on devices of compute capability 9.0.
#include "backend/cuda/act.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/linear_epilogue.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/wgmma.cuh"

namespace tf::cuda {
namespace {

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::smem_addr;
using wgmma::desc_sw128;
using wgmma::fence_async_shared;

constexpr int kChunk = 256;  // the contract's k chunk (linear_tc.cu)
constexpr int BM = 128, BK = 64, kThreads = 256;
constexpr int kRowsPerPass = kThreads / (BK / 8);  // 32 rows per pass of the block's 16-byte copies
static_assert(kChunk % BK == 0 && kRowsPerPass % 8 == 0);
enum Epi { kPlain = 0, kAdd = 1, kGlu = 2, kQkv = 3 };  // the store (top of this file)
// kQkv's outputs: cos / sin [n, 64], q_out [n, heads, 64], k_out / v_out [n, kv, 64], all bf16.
struct QkvStore {
  const bf16_t* cos = nullptr;
  const bf16_t* sin = nullptr;
  bf16_t *q = nullptr, *k = nullptr, *v = nullptr;
  int heads = 0, kv = 0;
};

// BN output columns per block (wgmma m64nBNk16 per warpgroup), STAGES-deep ring, MINB blocks per SM; PIPE:
// two accumulator sets taking whole chunks in turn, so a chunk's end does not drain the wgmma pipe (its sum
// is added once the next chunk's first group is in flight).
template <int BN_, int STAGES_, int MINB_, bool PIPE_ = false>
struct WgCfg {
  static constexpr int BN = BN_, STAGES = STAGES_, MINB = MINB_;
  static constexpr bool PIPE = PIPE_;
  static constexpr int kAElems = BM * BK, kStageElems = (BM + BN) * BK;  // A then B; 1024-byte multiples
  static constexpr int kAPasses = BM / kRowsPerPass, kBPasses = BN / kRowsPerPass;
  static constexpr int kAcc = BN / 2;  // f32 accumulators per thread (m64 x BN over 128 threads)
  static constexpr size_t kSmem = size_t{STAGES} * kStageElems * sizeof(bf16_t) + 1024;  // + alignment slack
  static_assert(BN % kRowsPerPass == 0 && (kStageElems * 2) % 1024 == 0 && STAGES >= 3);
  static_assert(kSmem <= 232448, "more than a block's shared memory");
};

// d[64] += A (64 x 16, descriptor a) · B (16 x 128, descriptor b); d laid out as mma.sync's C fragments:
// d[4q .. 4q + 1] row lane / 4, columns 8q + 2 (lane % 4) + {0, 1}; d[4q + 2 .. 4q + 3] row lane / 4 + 8
// (rows within the warp's 16 of the warpgroup's 64).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63 "
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
#else
  __trap();  // built for sm_90a only (the caller checks the device)
#endif
}

template <int BN>
__device__ __forceinline__ void wgmma_k16(float (&d)[BN / 2], uint64_t a, uint64_t b) {
  if constexpr (BN == 128)
    wgmma_m64n128k16(d, a, b);
  else
    wgmma::m64n64k16_ss(d, a, b);
}

// SPLIT (the split form, linear_split.cu; not with PIPE): block z runs chunk z alone and writes its partial,
// unrounded and without bias, to part[(z * n + i) * out_f + j] instead of out. EPI: the store (kAdd, kGlu:
// bf16 out; planted skips their intermediate rounding).
template <class C, class TO, bool SPLIT = false, int EPI = kPlain>
__global__ void __launch_bounds__(kThreads, C::MINB)
    linear_wgmma_kernel(const bf16_t* __restrict__ x, const bf16_t* __restrict__ w,
                        const bf16_t* __restrict__ bias, TO* __restrict__ out, int n, int in_f, int out_f,
                        bool pair_store, float* __restrict__ part, bool planted, QkvStore qs) {
  static_assert(!(SPLIT && C::PIPE) && !(SPLIT && EPI != kPlain));
  static_assert(EPI == kPlain || sizeof(TO) == 2);
  static_assert(EPI != kQkv || C::BN % 64 == 0);
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle atoms must start at 1024-byte shared addresses: align the stage ring there.
  const uint32_t raw = smem_addr(smem_raw);
  bf16_t* smem = reinterpret_cast<bf16_t*>(smem_raw + ((1024 - raw % 1024) % 1024));
  const uint32_t sbase = smem_addr(smem);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4;
  constexpr int BN = C::BN, STAGES = C::STAGES, NACC = C::kAcc;
  // j0: the block's first output column (kGlu: BN / 2 of them) and first weight row (kGlu: of the gate rows).
  constexpr int kOutCols = EPI == kGlu ? BN / 2 : BN;
  const int i0 = static_cast<int>(blockIdx.y) * BM, j0 = static_cast<int>(blockIdx.x) * kOutCols;
  const int k_tiles = (in_f + BK - 1) / BK;
  constexpr int kTilesPerChunk = kChunk / BK;
  const int full_chunks = in_f / kChunk;
  // Whole chunks [c_begin, c_end), then the shorter last one where `tail`; tiles [kt_first, kt_end).
  const int z = SPLIT ? static_cast<int>(blockIdx.z) : 0;
  const int c_begin = z, c_end = SPLIT ? min(full_chunks, z + 1) : full_chunks;
  const int kt_first = z * kTilesPerChunk, kt_end = SPLIT ? min(k_tiles, kt_first + kTilesPerChunk) : k_tiles;
  const bool tail = SPLIT ? z == full_chunks : full_chunks * kTilesPerChunk < k_tiles;

  // This thread's copy slots: rows ld_row + p * 32 of the A (x) and B (w) tiles, 16-byte chunk ld_ch.
  const int ld_row = tid / (BK / 8), ld_ch = tid % (BK / 8);
  const int ld_dst = ld_row * BK + (ld_ch ^ (ld_row % 8)) * 8;  // + p * 32 * BK (a multiple of 8 rows)
  const bf16_t* ga = x + (static_cast<int64_t>(i0) + ld_row) * in_f + ld_ch * 8;
  const bf16_t* gb = w + (static_cast<int64_t>(j0) + ld_row) * in_f + ld_ch * 8;
  const int a_left = n - i0 - ld_row, b_left = out_f - j0 - ld_row;  // pass p is a real row iff p*32 < left
  const int64_t pass_stride = static_cast<int64_t>(kRowsPerPass) * in_f;
  // kGlu: B passes [0, half) copy gate rows, [half, kBPasses) the same rows of up (out_f rows further).
  constexpr int kBHalf = EPI == kGlu ? C::kBPasses / 2 : C::kBPasses;
  static_assert(EPI != kGlu || C::kBPasses % 2 == 0);
  const int64_t up_offset = EPI == kGlu ? static_cast<int64_t>(out_f) * in_f : 0;

  // Queue tile kt's copies into its slot; past k a copy of zeros (no branch: the control flow stays
  // straight around the wgmma in flight, else ptxas waits for them at every merge).
  auto stage = [&](int kt) {
    bf16_t* sa = smem + (kt % STAGES) * C::kStageElems;
    bf16_t* sb = sa + C::kAElems;
    const int k0 = kt * BK;
    const bool kok = kt < kt_end && k0 + ld_ch * 8 < in_f;  // in_f % 8 == 0: a chunk is wholly in or out
#pragma unroll
    for (int p = 0; p < C::kAPasses; ++p) {
      const bool ok = kok && p * kRowsPerPass < a_left;
      cp_async16(sa + ld_dst + p * kRowsPerPass * BK, ok ? ga + p * pass_stride + k0 : x, ok);
    }
#pragma unroll
    for (int p = 0; p < C::kBPasses; ++p) {
      if constexpr (EPI == kGlu) {
        const int pq = p % kBHalf;  // the gate passes' rows again for the up passes
        const bool ok = kok && pq * kRowsPerPass < b_left;
        const bf16_t* src = gb + (p >= kBHalf ? up_offset : 0) + pq * pass_stride + k0;
        cp_async16(sb + ld_dst + p * kRowsPerPass * BK, ok ? src : w, ok);
      } else {
        const bool ok = kok && p * kRowsPerPass < b_left;
        cp_async16(sb + ld_dst + p * kRowsPerPass * BK, ok ? gb + p * pass_stride + k0 : w, ok);
      }
    }
    cp_async_commit();  // a group per tile, so the wait counts below hold
  };
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) stage(kt_first + s);

  // Tile kt's copies landed and visible to the async proxy; queue tile kt + STAGES - 2 into the slot of tile
  // kt - 2, whose wgmma both warpgroups waited for before this barrier. Returns the A and B descriptors'
  // shared addresses for this warpgroup.
  auto begin_tile = [&](int kt, uint32_t& a0, uint32_t& b0) {
    cp_async_wait<STAGES - 3>();
    fence_async_shared();
    __syncthreads();
    stage(kt + STAGES - 2);
    const uint32_t sa = sbase + static_cast<uint32_t>((kt % STAGES) * C::kStageElems * sizeof(bf16_t));
    a0 = sa + wg * 64 * BK * sizeof(bf16_t);
    b0 = sa + C::kAElems * sizeof(bf16_t);
  };

  float acc[NACC], tot[NACC];
#pragma unroll
  for (int c = 0; c < NACC; ++c)
    acc[c] = 0.0f, tot[c] = -0.0f;  // -0: the exact identity (linear_tc_large.cu)

  // Whole chunks: four full tiles each, one wgmma group in flight across tiles (straight-line code between
  // the chunk loop's iterations, else ptxas waits for the groups at every merge).
  // PIPE: chunk c's tiles into acc (c even) or acc2 (c odd); once its first group is queued, the previous
  // chunk's sum (the other set, whose groups are then done) is added to tot in chunk order and that set
  // starts again from zero. A macro, not a lambda: nvcc 13.0's front end crashes (segmentation fault) on a
  // lambda here that takes the accumulator arrays by reference.
  float acc2[NACC];
#pragma unroll
  for (int c = 0; c < NACC; ++c) acc2[c] = 0.0f;
#define TF_WGMMA_PIPE_CHUNK(c, A, PREV, ADD)                                                             \
  _Pragma("unroll") for (int t = 0; t < kTilesPerChunk; ++t) {                                           \
    uint32_t a0, b0;                                                                                     \
    begin_tile((c)*kTilesPerChunk + t, a0, b0);                                                          \
    wgmma::fence();                                                                                      \
    _Pragma("unroll") for (int s = 0; s < BK / 16; ++s)                                                  \
        wgmma_k16<BN>(A, desc_sw128(a0 + s * 32), desc_sw128(b0 + s * 32));                              \
    wgmma::commit();                                                                                     \
    wgmma::wait<1>(); /* every group but this tile's done */                                             \
    if (ADD && t == 0) {                                                                                 \
      _Pragma("unroll") for (int c2 = 0; c2 < NACC; ++c2) tot[c2] = tot[c2] + PREV[c2], PREV[c2] = 0.0f; \
    }                                                                                                    \
  }
  if constexpr (C::PIPE) {
    if (full_chunks > 0) {
      TF_WGMMA_PIPE_CHUNK(0, acc, acc2, false)
      int c = 1;
      for (; c + 1 < full_chunks; c += 2) {
        TF_WGMMA_PIPE_CHUNK(c, acc2, acc, true)
        TF_WGMMA_PIPE_CHUNK(c + 1, acc, acc2, true)
      }
      if (c < full_chunks) {
        TF_WGMMA_PIPE_CHUNK(c, acc2, acc, true)
      }
      wgmma::wait<0>();
      // The last whole chunk's sum: in acc2 where full_chunks is even, in acc where odd (the other is zero).
      const bool even = full_chunks % 2 == 0;
#pragma unroll
      for (int c2 = 0; c2 < NACC; ++c2) tot[c2] = tot[c2] + (even ? acc2[c2] : acc[c2]), acc[c2] = 0.0f;
    }
  } else {
    for (int c = c_begin; c < c_end; ++c) {
#pragma unroll
      for (int t = 0; t < kTilesPerChunk; ++t) {
        uint32_t a0, b0;
        begin_tile(c * kTilesPerChunk + t, a0, b0);
        wgmma::fence();
#pragma unroll
        for (int s = 0; s < BK / 16; ++s)
          wgmma_k16<BN>(acc, desc_sw128(a0 + s * 32), desc_sw128(b0 + s * 32));
        wgmma::commit();
        if (t + 1 < kTilesPerChunk)
          wgmma::wait<1>();  // tile kt - 1's group done
        else
          wgmma::wait<0>();
      }
#pragma unroll
      for (int c2 = 0; c2 < NACC; ++c2) tot[c2] = tot[c2] + acc[c2], acc[c2] = 0.0f;
    }
  }
#undef TF_WGMMA_PIPE_CHUNK
  // The last, shorter chunk (in_f % 256): its tiles one at a time, k16 steps at or past in_f skipped.
  if (tail) {
    for (int kt = full_chunks * kTilesPerChunk; kt < k_tiles; ++kt) {
      uint32_t a0, b0;
      begin_tile(kt, a0, b0);
      const int live = in_f - kt * BK;  // k left from this tile's start
      wgmma::fence();
#pragma unroll
      for (int s = 0; s < BK / 16; ++s)
        if (s * 16 < live)  // the same chain length in every configuration (warpgroup-uniform)
          wgmma_k16<BN>(acc, desc_sw128(a0 + s * 32), desc_sw128(b0 + s * 32));
      wgmma::commit();
      wgmma::wait<0>();
    }
#pragma unroll
    for (int c = 0; c < NACC; ++c) tot[c] = tot[c] + acc[c];
  }
  cp_async_wait<0>();

  const int g = lane / 4, t = lane % 4, row0 = i0 + wg * 64 + (warp % 4) * 16 + g;
  if constexpr (EPI == kGlu) {
    constexpr int QH = BN / 16;  // gate fragments; fragment q + QH holds the same columns of up
#pragma unroll
    for (int q = 0; q < QH; ++q) {
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float gv = planted ? tot[4 * q + e] : rnd<bf16_t>(tot[4 * q + e]);
        const float uv = planted ? tot[4 * (q + QH) + e] : rnd<bf16_t>(tot[4 * (q + QH) + e]);
        v[e] = act_one<ActKind::kSilu, bf16_t>(gv) * uv;
      }
      store_fragment(out, nullptr, v, row0, j0 + q * 8 + 2 * t, n, out_f, pair_store);
    }
  } else if constexpr (EPI == kQkv) {
#pragma unroll
    for (int hg = 0; hg < BN / 64; ++hg) {  // the tile's heads
      const int col0 = j0 + hg * 64, hh = col0 / 64;
      if (col0 >= out_f) break;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int f0 = hg * 8 + q, f1 = f0 + 4, j = q * 8 + 2 * t;  // pairs (j + c, j + c + 32), c = 0, 1
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row0 + h * 8;
          if (r >= n) continue;
          float lo[2], hi[2];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            lo[c] = tot[4 * f0 + 2 * h + c] + (bias ? to_f(bias[col0 + j + c]) : 0.0f);
            hi[c] = tot[4 * f1 + 2 * h + c] + (bias ? to_f(bias[col0 + j + c + 32]) : 0.0f);
            if (!planted) lo[c] = rnd<bf16_t>(lo[c]), hi[c] = rnd<bf16_t>(hi[c]);
          }
          bf16_t* dst;
          if (hh >= qs.heads + qs.kv) {  // v: copied
            dst = qs.v + (static_cast<int64_t>(r) * qs.kv + (hh - qs.heads - qs.kv)) * 64;
          } else {
            dst = hh < qs.heads ? qs.q + (static_cast<int64_t>(r) * qs.heads + hh) * 64
                                : qs.k + (static_cast<int64_t>(r) * qs.kv + (hh - qs.heads)) * 64;
            const bf16_t* cr = qs.cos + static_cast<int64_t>(r) * 64;
            const bf16_t* sr = qs.sin + static_cast<int64_t>(r) * 64;
            float a[2], b[2];
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const float c0 = to_f(cr[j + c]), s0 = to_f(sr[j + c]);
              const float c1 = to_f(cr[j + c + 32]), s1 = to_f(sr[j + c + 32]);
              a[c] = rnd<bf16_t>(lo[c] * c0) + rnd<bf16_t>(-hi[c] * s0);
              b[c] = rnd<bf16_t>(hi[c] * c1) + rnd<bf16_t>(lo[c] * s1);
            }
            lo[0] = a[0], lo[1] = a[1], hi[0] = b[0], hi[1] = b[1];
          }
          const uint32_t lo2 = f2bf(lo[0]) | (static_cast<uint32_t>(f2bf(lo[1])) << 16);
          const uint32_t hi2 = f2bf(hi[0]) | (static_cast<uint32_t>(f2bf(hi[1])) << 16);
          *reinterpret_cast<uint32_t*>(dst + j) = lo2;  // 4-byte aligned outputs (the caller checks)
          *reinterpret_cast<uint32_t*>(dst + j + 32) = hi2;
        }
      }
    }
  } else {
#pragma unroll
    for (int q = 0; q < BN / 8; ++q) {
      float v[4] = {tot[4 * q], tot[4 * q + 1], tot[4 * q + 2], tot[4 * q + 3]};
      if constexpr (SPLIT)
        store_fragment(part + static_cast<int64_t>(z) * n * out_f, nullptr, v, row0, j0 + q * 8 + 2 * t, n,
                       out_f, pair_store);
      else if constexpr (EPI == kAdd)
        add_fragment(out, bias, v, row0, j0 + q * 8 + 2 * t, n, out_f, pair_store, planted);
      else
        store_fragment(out, bias, v, row0, j0 + q * 8 + 2 * t, n, out_f, pair_store);
    }
  }
}

// out_f: the output's width (kGlu: w has 2 out_f rows).
template <class C, class TO, int EPI = kPlain>
void launch(cudaStream_t s, const bf16_t* x, const bf16_t* w, const bf16_t* bias, TO* out, int64_t n,
            int64_t in_f, int64_t out_f, bool planted = false, const QkvStore& qs = {}) {
  auto kernel = linear_wgmma_kernel<C, TO, false, EPI>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::kSmem)));
  });
  const dim3 grid(blocks_for(out_f, EPI == kGlu ? C::BN / 2 : C::BN), blocks_for(n, BM));
  TF_CHECK(grid.y <= 65535);
  const bool pair = out_f % 2 == 0 && reinterpret_cast<uintptr_t>(out) % (2 * sizeof(TO)) == 0;
  kernel<<<grid, kThreads, C::kSmem, s>>>(x, w, bias, out, static_cast<int>(n), static_cast<int>(in_f),
                                          static_cast<int>(out_f), pair, nullptr, planted, qs);
  TF_CUDA_LAUNCHED();
}

// 10: 128 x 128 blocks, 5 stages (161 KB), one per SM; 11: 128 x 64, 4 stages (97 KB), two per SM (twice the
// blocks: fewer idle SMs in a last wave where a call has few 128-column tiles); 12 and 13: 10 and 11 with the
// two accumulator sets (PIPE; 13 one block per SM with 6 stages, its registers past two blocks' share).
// 12 and 13 have not run on a GPU yet (tenth session: written after its device time).
template <class TO>
void run(cudaStream_t s, int which, const bf16_t* x, const bf16_t* w, const bf16_t* b, TO* o, int64_t n,
         int64_t in_f, int64_t out_f) {
  switch (which) {
    case 10:
      return launch<WgCfg<128, 5, 1>, TO>(s, x, w, b, o, n, in_f, out_f);
    case 11:
      return launch<WgCfg<64, 4, 2>, TO>(s, x, w, b, o, n, in_f, out_f);
    case 12:
      return launch<WgCfg<128, 5, 1, true>, TO>(s, x, w, b, o, n, in_f, out_f);
    case 13:
      return launch<WgCfg<64, 6, 1, true>, TO>(s, x, w, b, o, n, in_f, out_f);
    default:
      TF_CHECK(false && "unknown wgmma linear configuration");
  }
}

}  // namespace

bool launch_linear_tc_wgmma_split(cudaStream_t s, const bf16_t* x, const bf16_t* w, float* part, int64_t n,
                                  int64_t in_f, int64_t out_f) {
  if (!wgmma::device_is_sm90()) return false;
  using C = WgCfg<64, 4, 2>;  // configuration 11's blocks
  auto kernel = linear_wgmma_kernel<C, float, true>;
  static OncePerDevice attr;
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::kSmem)));
  });
  const dim3 grid(blocks_for(out_f, C::BN), blocks_for(n, BM), blocks_for(in_f, kChunk));
  TF_CHECK(grid.y <= 65535 && grid.z <= 65535);
  kernel<<<grid, kThreads, C::kSmem, s>>>(x, w, nullptr, nullptr, static_cast<int>(n), static_cast<int>(in_f),
                                          static_cast<int>(out_f), out_f % 2 == 0, part, false, QkvStore{});
  TF_CUDA_LAUNCHED();
  return true;
}

bool launch_linear_tc_wgmma_epi(cudaStream_t s, int which, bool glu, const bf16_t* x, const bf16_t* w,
                                const bf16_t* bias, bf16_t* out, int64_t n, int64_t in_f, int64_t out_f,
                                bool planted) {
  if (!wgmma::device_is_sm90() || (glu && bias)) return false;
  using C10 = WgCfg<128, 5, 1>;
  using C11 = WgCfg<64, 4, 2>;
  if (which == 10)
    glu ? launch<C10, bf16_t, kGlu>(s, x, w, nullptr, out, n, in_f, out_f, planted)
        : launch<C10, bf16_t, kAdd>(s, x, w, bias, out, n, in_f, out_f, planted);
  else if (which == 11)
    glu ? launch<C11, bf16_t, kGlu>(s, x, w, nullptr, out, n, in_f, out_f, planted)
        : launch<C11, bf16_t, kAdd>(s, x, w, bias, out, n, in_f, out_f, planted);
  else
    return false;  // (12, 13: candidates without the fused stores)
  return true;
}

bool launch_linear_tc_wgmma_qkv(cudaStream_t s, int which, const bf16_t* x, const bf16_t* w,
                                const bf16_t* bias, const bf16_t* cos, const bf16_t* sin, bf16_t* q,
                                bf16_t* k, bf16_t* v, int64_t n, int64_t in_f, int heads, int kv,
                                bool planted) {
  if (!wgmma::device_is_sm90()) return false;
  const QkvStore qs{cos, sin, q, k, v, heads, kv};
  const int64_t out_f = int64_t{heads + 2 * kv} * 64;
  if (which == 10)
    launch<WgCfg<128, 5, 1>, bf16_t, kQkv>(s, x, w, bias, nullptr, n, in_f, out_f, planted, qs);
  else if (which == 11)
    launch<WgCfg<64, 4, 2>, bf16_t, kQkv>(s, x, w, bias, nullptr, n, in_f, out_f, planted, qs);
  else
    return false;
  return true;
}

bool launch_linear_tc_wgmma(cudaStream_t s, int which, const bf16_t* x, const bf16_t* w, const bf16_t* bias,
                            void* out, DType out_dtype, int64_t n, int64_t in_f, int64_t out_f) {
  if (!wgmma::device_is_sm90()) return false;
  if (out_dtype == DType::BF16)
    run<bf16_t>(s, which, x, w, bias, static_cast<bf16_t*>(out), n, in_f, out_f);
  else
    run<float>(s, which, x, w, bias, static_cast<float*>(out), n, in_f, out_f);
  return true;
}

}  // namespace tf::cuda
