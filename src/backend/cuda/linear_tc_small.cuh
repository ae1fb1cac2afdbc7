// The linear of <= 64 rows (linear_tc_small.cu: the arithmetic, the measurements) as a kernel template with
// two optional fusions, for the decode step's chain of small kernels (linear_tc_small_fused.cu):
// - prologue kNorm: x is the residual stream h; each block computes rms_norm(h) (rms_norm.cu's statements:
//   8 lane sums of squares in increasing k, combine8, 1 / sqrtf, the kind's roundings) into shared memory
//   and runs the linear on it, so the normalised rows never go through global memory;
// - epilogue kGlu: the weight is a gate | up stack [2d, in_f]; a block's BN columns are BN / 2 gate
//   columns and the same up columns, and it stores glu's rnd(a(rnd(gate)) * rnd(up)) (act.cu's statement);
// - epilogue kAdd: out is the residual stream h, and h = rnd(h + rnd(y)) (`add`'s statement) is stored.
// Every output column's k chain is the plain kernel's, so a fused call's values are bit for bit those of
// the ops it replaces (CudaContract.FusedLinears).
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>

#include "backend/cuda/act.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda::small {

using namespace mma;

enum class Pro { kNone, kNorm };
enum class Epi { kStore, kGlu, kAdd };

// The fused forms' extra operands.
struct Fusion {
  const bf16_t* norm_w = nullptr;  // kNorm: [in_f]
  float eps = 0.0f;
  bool one_plus = false;  // kNorm: RmsNormKind::kOnePlusWeight
  int glu_d = 0;          // kGlu: the output's width d (the weight has 2 d rows: gate, then up)
};

// MT m16 tiles of rows (BM = 16 MT), NT n8 tiles of columns (BN = 8 NT), sub-tiles of SUB k, S stages.
// Shared memory: the partials [nw][BM * BN] f32; kNorm: the normalised rows [n][in_f + 8] bf16 and the norm
// weight [in_f] bf16; then per warp S stages of [xr + BN][SUB + 8] bf16 (x's real rows, none with kNorm,
// then w's BN rows; the 8 pad elements put 8 consecutive rows on distinct banks).
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
  // kNorm's rows, weight and per-row 1 / rms (norm_f = in_f; 0 without the prologue), 16-byte multiples.
  __host__ __device__ static size_t norm_bytes(int n, int norm_f) {
    return norm_f ? (size_t(n) * (norm_f + 8) + norm_f) * sizeof(bf16_t) + kBM * sizeof(float) : 0;
  }
  static size_t smem(int n, int nw, int norm_f) {
    const int xr = norm_f ? 0 : n;
    return part_bytes(nw) + norm_bytes(n, norm_f) + size_t(nw) * S * size_t(xr + kBN) * kLd * sizeof(bf16_t);
  }
};

// One 16-step of k: the A fragments of the MT m16 tiles (x rows at stride ldx; rows past the call's last
// read that row: output row i depends only on row i of A) times NT n8 tiles of w (stride LD), one mma per
// (m16, n8): linear_tc.cu's step.
template <int MT, int NT, int LD>
__device__ __forceinline__ void small_step(float (&acc)[MT][NT][4], const bf16_t* sx, int ldx,
                                           const bf16_t* sw, int kk, int lane, int n, int mt_live) {
  uint32_t af[MT][4];
#pragma unroll
  for (int a = 0; a < MT; ++a) {
    const int row = min(a * 16 + lane % 16, n - 1);
    if (a < mt_live) ldmatrix_x4(af[a], sx + row * ldx + kk + (lane / 16) * 8);
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
// numbered one after another: segment s owns tiles [tile0[s], tile0[s + 1]). kGlu: one segment, out_f = d,
// a tile is BN / 2 columns of d.
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

// rms_norm.cu's 1 / rms of one row of in_f values in shared memory (a warp; every lane returns it): lane l
// of 8 sums x_k² for k ≡ l mod 8 in increasing k (block_sum_sq8's loop, common.cuh: the next 8 terms of the
// lane loaded, then added in order), combine8, 1 / sqrtf(Σ / d + eps).
__device__ __forceinline__ float row_inv_rms(const bf16_t* row, int in_f, float eps, int lane) {
  float a = 0.0f;
  if (lane < 8) {
    int k = lane;
    for (; k + 56 < in_f; k += 64) {
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = to_f(row[k + 8 * u]);
#pragma unroll
      for (int u = 0; u < 8; ++u) a += v[u] * v[u];
    }
    for (; k < in_f; k += 8) {
      const float v = to_f(row[k]);
      a += v * v;
    }
  }
  float l8[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) l8[u] = __shfl_sync(0xffffffffu, a, u);
  return 1.0f / sqrtf(combine8(l8) / static_cast<float>(in_f) + eps);
}

// rms_norm.cu's statement for 8 values of a row whose 1 / rms is r: kWeight rnd(w rnd(x r)), kOnePlusWeight
// x r (1 + w).
__device__ __forceinline__ uint4 norm8(uint4 xv, uint4 wv, float r, bool one_plus) {
  const bf16_t* xe = reinterpret_cast<const bf16_t*>(&xv);
  const bf16_t* we = reinterpret_cast<const bf16_t*>(&wv);
  uint4 yv;
  bf16_t* ye = reinterpret_cast<bf16_t*>(&yv);
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const float v = to_f(xe[u]), wi = to_f(we[u]);
    ye[u] = f2bf(one_plus ? v * r * (1.0f + wi) : rnd<bf16_t>(wi * rnd<bf16_t>(v * r)));
  }
  return yv;
}

// kNorm: rows [0, n) of h into xs (stride in_f + 8), normalised in place (row_inv_rms, norm8). wn: the norm
// weight, already copied (cp.async group 0).
template <int S>
__device__ void norm_rows(const bf16_t* __restrict__ h, bf16_t* xs, const bf16_t* wn, float* inv, int n,
                          int in_f, const Fusion& fu) {
  const int nt = static_cast<int>(blockDim.x), warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32), ldx = in_f + 8, vecs = in_f / 8;
  for (int e = static_cast<int>(threadIdx.x); e < n * vecs; e += nt) {
    const int i = e / vecs, c = (e % vecs) * 8;
    *reinterpret_cast<uint4*>(xs + i * ldx + c) =
        *reinterpret_cast<const uint4*>(h + static_cast<int64_t>(i) * in_f + c);
  }
  // The row's 8 pad elements are zero: a last 16-step past in_f (in_f % 16 == 8) reads them against the
  // zero-filled weight, and a NaN or Inf left in shared memory by an earlier kernel would turn 0 into NaN.
  for (int i = static_cast<int>(threadIdx.x); i < n; i += nt)
    *reinterpret_cast<uint4*>(xs + i * ldx + in_f) = make_uint4(0, 0, 0, 0);
  __syncthreads();
  for (int i = warp; i < n; i += nt / 32) {
    const float r = row_inv_rms(xs + i * ldx, in_f, fu.eps, lane);
    if (lane == 0) inv[i] = r;
  }
  cp_async_wait<S - 2>();  // group 0 (the norm weight with the first weight sub-tile) landed
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < n * vecs; e += nt) {  // 8 elements of one row each
    const int i = e / vecs, c = (e % vecs) * 8;
    bf16_t* x8 = xs + i * ldx + c;
    *reinterpret_cast<uint4*>(x8) = norm8(*reinterpret_cast<const uint4*>(x8),
                                          *reinterpret_cast<const uint4*>(wn + c), inv[i], fu.one_plus);
  }
  __syncthreads();
}

template <class Cfg, int MT, int NT, int SUB, int S, class TO, Pro PRO, Epi EPI>
__global__ void __launch_bounds__(512)
    linear_tc_small_kernel(const bf16_t* __restrict__ x, const Segs<TO> sg, int n, int in_f, int kc,
                           int trigger, const Fusion fu) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, LD = Cfg::kLd, RPV = Cfg::kRpv, HALF = Cfg::kWVec / 2;
  constexpr bool kNorm = PRO == Pro::kNorm, kGlu = EPI == Epi::kGlu;
  static_assert(!kGlu || (Cfg::kWVec % 2 == 0 && (BN / 2) % RPV == 0), "glu: gate rows, then up rows");
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
  bf16_t* xs = reinterpret_cast<bf16_t*>(smem_raw + Cfg::part_bytes(nw));  // kNorm: [n][in_f + 8]
  bf16_t* wn = xs + (kNorm ? n * (in_f + 8) : 0);                          // kNorm: [in_f]
  float* inv = reinterpret_cast<float*>(wn + (kNorm ? in_f : 0));          // kNorm: [BM]
  const int xr = kNorm ? 0 : n, ldx = kNorm ? in_f + 8 : LD;
  const int stage = (xr + BN) * LD;  // elements per stage: x rows [0, xr), then w rows [xr, xr + BN)
  bf16_t* ring =
      reinterpret_cast<bf16_t*>(smem_raw + Cfg::part_bytes(nw) + Cfg::norm_bytes(n, kNorm ? in_f : 0)) +
      warp * S * stage;

  // This lane's copies: vector i of a sub-tile is row vr + i * RPV, columns [vc, vc + 8) (w rows from the
  // tile's first column j0, x rows from 0). Rows past out_f are zero-filled (their outputs are not stored); x
  // rows past n are not copied (never read); a vector past in_f is zero-filled (in_f % 8 == 0: all in or all
  // out). kGlu: vectors i < HALF are gate rows h0 + vr + i RPV, the others the up rows d + h0 + ....
  const int vr = lane / Cfg::kVec, vc = (lane % Cfg::kVec) * 8;
  const bf16_t* xg = x + static_cast<int64_t>(min(vr, n - 1)) * in_f + vc;
  const int64_t w_step = static_cast<int64_t>(RPV) * in_f;  // between a lane's consecutive w vectors
  auto issue_w = [&](int slot, int tile, int k0) {
    const int sgi = seg_of(tile), out_f = sg.out_f[sgi];
    const bf16_t* w = sg.w[sgi];
    bf16_t* sw = ring + slot * stage + (xr + vr) * LD + vc;
    const bool kok = k0 + vc < in_f;
    if constexpr (kGlu) {
      const int h0 = (tile - sg.tile0[sgi]) * (BN / 2), left = out_f - h0 - vr;
      const bf16_t* gg = w + static_cast<int64_t>(min(h0 + vr, out_f - 1)) * in_f + vc;
      const int64_t up = static_cast<int64_t>(out_f) * in_f;
#pragma unroll
      for (int i = 0; i < Cfg::kWVec; ++i) {
        const int ih = i % HALF;
        const bool ok = kok && ih * RPV < left;
        cp_async16(sw + i * RPV * LD, ok ? gg + (i < HALF ? 0 : up) + ih * w_step + k0 : w, ok);
      }
    } else {
      const int j0 = (tile - sg.tile0[sgi]) * BN;
      const int w_rows_left = out_f - j0 - vr;  // vector i is real while i * RPV < this
      const bf16_t* wg = w + static_cast<int64_t>(min(j0 + vr, out_f - 1)) * in_f + vc;
#pragma unroll
      for (int i = 0; i < Cfg::kWVec; ++i) {
        const bool ok = kok && i * RPV < w_rows_left;
        cp_async16(sw + i * RPV * LD, ok ? wg + i * w_step + k0 : w, ok);
      }
    }
  };
  auto issue_x = [&](int slot, int k0) {
    if constexpr (!kNorm) {
      bf16_t* sx = ring + slot * stage + vr * LD + vc;
      const bool kok = k0 + vc < in_f;
#pragma unroll
      for (int i = 0; i < Cfg::kXVec; ++i)
        if (vr + i * RPV < n) cp_async16(sx + i * RPV * LD, kok ? xg + i * w_step + k0 : x, kok);
    }
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

  // Prologue: the weights of sub-tiles 0 .. S - 2 (they never depend on the previous kernel; kNorm: the
  // norm weight in group 0), then, once the previous kernel is done (a no-op without programmatic dependent
  // launch), their x in one group (kNorm: the normalised rows, computed by the block).
  int pro_k[S - 1];
#pragma unroll
  for (int q = 0; q < S - 1; ++q) {
    int tile;
    pro_k[q] = next_k(tile);
    if (pro_k[q] < in_f) issue_w(q, tile, pro_k[q]);
    if (kNorm && q == 0)
      for (int c = static_cast<int>(threadIdx.x) * 8; c < in_f; c += nw * 256)
        cp_async16(wn + c, fu.norm_w + c, true);
    cp_async_commit();
  }
  pdl_wait();
  if constexpr (kNorm) {
    norm_rows<S>(x, xs, wn, inv, n, in_f, fu);
  } else {
#pragma unroll
    for (int q = 0; q < S - 1; ++q)
      if (pro_k[q] < in_f) issue_x(q, pro_k[q]);
    cp_async_commit();
  }
  if (trigger) pdl_trigger();

  const int per_thread = (n * BN + nw * 32 - 1) / (nw * 32);
  // kAdd: the residual values of the block's first tile (a thread's first kPre of them: all of them at
  // decode sizes), read now (after the wait) so the epilogue does not wait on them: the same values it
  // would read there (only this block writes them, at its end).
  constexpr int kPre = Cfg::kPer < 4 ? Cfg::kPer : 4;
  float h_pre[kPre];
  if constexpr (EPI == Epi::kAdd) {
    const int tile = static_cast<int>(blockIdx.x);
    if (tile < n_tiles) {
      const int sgi = seg_of(tile), j0 = (tile - sg.tile0[sgi]) * BN, out_f = sg.out_f[sgi];
#pragma unroll
      for (int m = 0; m < kPre; ++m) {
        const int e = static_cast<int>(threadIdx.x) + m * nw * 32, i = e / BN, j = j0 + e % BN;
        h_pre[m] = m < per_thread && i < n && j < out_f
                       ? to_f(sg.out[sgi][static_cast<int64_t>(i) * out_f + j])
                       : 0.0f;
      }
    }
  }
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
          if (q == 0 && !kNorm)
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
          const bf16_t* st = ring + (q % S) * stage;
          const bf16_t* sx = kNorm ? xs + k0 : st;
#pragma unroll
          for (int kk = 0; kk < SUB; kk += 16) {
            if (k0 + kk >= in_f) break;  // the same chain length in every configuration
            small_step<MT, NT, LD>(acc, sx, ldx, st + xr * LD, kk, lane, n, mt_live);
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

    const int sgi = seg_of(tile), out_f = sg.out_f[sgi];
    const bf16_t* bias = sg.bias[sgi];
    TO* out = sg.out[sgi];
    if constexpr (kGlu) {  // gate and up columns meet in shared memory (as the linear rounds them)
      const int h0 = (tile - sg.tile0[sgi]) * (BN / 2);
#pragma unroll
      for (int m = 0; m < Cfg::kPer; ++m) {
        const int e = static_cast<int>(threadIdx.x) + m * nw * 32;
        if (m < per_thread && e < n * BN) part[e] = rnd<bf16_t>(total[m]);
      }
      __syncthreads();
      for (int e = static_cast<int>(threadIdx.x); e < n * (BN / 2); e += nw * 32) {
        const int i = e / (BN / 2), c = e % (BN / 2);
        if (h0 + c >= out_f) continue;
        const float gv = part[i * BN + c], uv = part[i * BN + BN / 2 + c];
        out[static_cast<int64_t>(i) * out_f + h0 + c] = from_f<TO>(act_one<ActKind::kSilu, bf16_t>(gv) * uv);
      }
      __syncthreads();  // part is the next tile's
    } else {
      const int j0 = (tile - sg.tile0[sgi]) * BN;
#pragma unroll
      for (int m = 0; m < Cfg::kPer; ++m) {
        if (m >= per_thread) break;
        const int e = static_cast<int>(threadIdx.x) + m * nw * 32;
        const int i = e / BN, j = j0 + e % BN;
        if (i >= n) break;
        if (j >= out_f) continue;
        float v = total[m];
        if (bias) v += to_f(bias[j]);
        TO* o = out + static_cast<int64_t>(i) * out_f + j;
        if constexpr (EPI == Epi::kAdd)
          *o = from_f<TO>(
              (m < kPre && tile == static_cast<int>(blockIdx.x) ? h_pre[m < kPre ? m : 0] : to_f(*o)) +
              rnd<TO>(v));
        else
          *o = from_f<TO>(v);
      }
    }
  }
  cp_async_wait<0>();
}

// One configuration's launch shape: nw warps (chunks per round; fewer where shared memory runs out), the
// dynamic shared memory, the blocks, and how many blocks fit on one SM.
struct Plan {
  int nw = 1, rounds = 1, blocks = 0, per_sm = 0;
  size_t smem = 0;
};

// R: the ring of a <= 16-row call (a Variant's `ring`): 0 64-wide sub-tiles 5 deep (a whole chunk in
// flight per warp before its first mma), 1 128-wide 4 deep, 2 256-wide 3 deep (one chunk's row per copy),
// 3 64-wide 8 deep. 17..64 rows: x dominates a stage, so 32-wide sub-tiles, 4 deep (R 0 only).
template <int MT, int NT, int R = 0>
struct Shape {
  static_assert(R >= 0 && R <= 3 && (MT == 1 || R == 0));
  static constexpr int SUB = MT != 1 ? 32 : R == 1 ? 128 : R == 2 ? 256 : 64;
  static constexpr int S = MT != 1 ? 4 : R == 1 ? 4 : R == 2 ? 3 : R == 3 ? 8 : 5;
  using Cfg = SmallCfg<MT, NT, SUB, S>;
};

template <int MT, int NT, class TO, Pro P = Pro::kNone, Epi E = Epi::kStore, int R = 0>
auto small_kernel() {
  using Sh = Shape<MT, NT, R>;
  return linear_tc_small_kernel<typename Sh::Cfg, MT, NT, Sh::SUB, Sh::S, TO, P, E>;
}

// The device's opt-in shared memory per block, set as the kernel's dynamic limit once per device (a
// function attribute belongs to one device's context; serve --devices runs one backend per GPU).
template <int MT, int NT, class TO, Pro P, Epi E, int R>
int max_smem() {
  static OncePerDevice attr;
  static std::atomic<int> optin{0};
  attr.run([](int dev) {
    int v = 0;
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    TF_CUDA_CHECK(cudaFuncSetAttribute(small_kernel<MT, NT, TO, P, E, R>(),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, v));
    optin.store(v, std::memory_order_relaxed);
  });
  return optin.load(std::memory_order_relaxed);
}

// out_f: all segments' columns; kNorm: its rows and weight in shared memory too.
template <int MT, int NT, class TO, Pro P = Pro::kNone, Epi E = Epi::kStore, int R = 0>
Plan plan(int n, int in_f, int out_f, int kc, int nw_cap, bool occupancy) {
  using Cfg = typename Shape<MT, NT, R>::Cfg;
  const int limit = max_smem<MT, NT, TO, P, E, R>(), norm_f = P == Pro::kNorm ? in_f : 0;
  const int n_chunks = (in_f + kc - 1) / kc;
  Plan p;
  p.nw = std::min(n_chunks, nw_cap);
  while (p.nw > 1 && Cfg::smem(n, p.nw, norm_f) > static_cast<size_t>(limit)) --p.nw;
  TF_CHECK(Cfg::smem(n, p.nw, norm_f) <= static_cast<size_t>(limit));
  p.rounds = (n_chunks + p.nw - 1) / p.nw;
  p.smem = Cfg::smem(n, p.nw, norm_f);
  p.blocks = static_cast<int>(blocks_for(out_f, 8 * NT));
  if (occupancy)
    TF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &p.per_sm, small_kernel<MT, NT, TO, P, E, R>(), 32 * p.nw, p.smem));
  return p;
}

// test_hooks::set_cuda_linear_small_grid_cap, or TF_CUDA_LINEAR_SMALL_GRID for whole runs (1000000: a block
// per tile, the form before tiles were walked).
inline std::atomic<int> g_grid_cap{env_choice("TF_CUDA_LINEAR_SMALL_GRID", 0, 1 << 30, 0)};

// The blocks of a launch: every tile's block at once where they fit on the SMs (one wave), else as many as
// fit (each then walks several tiles, its weight stream running on across them: no wave's start and drain
// between). test_hooks::set_cuda_linear_small_grid_cap lowers it. Cached per (warps, shared memory).
template <int MT, int NT, class TO, Pro P, Epi E, int R>
int resident_blocks(const Plan& p) {
  if (const int cap = g_grid_cap.load(std::memory_order_relaxed); cap > 0) return cap;
  static std::mutex mu;
  static std::map<std::array<int64_t, 3>, int> cache;
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  const std::array<int64_t, 3> key{dev, p.nw, static_cast<int64_t>(p.smem)};  // per instantiation (static)
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  int per_sm = 0, sms = 0;
  TF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, small_kernel<MT, NT, TO, P, E, R>(),
                                                              32 * p.nw, p.smem));
  TF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int v = std::max(1, per_sm) * sms;
  cache[key] = v;
  return v;
}

// out_f: every segment's weight rows (kGlu: 2 d, sg.out_f[0] = d).
template <int MT, int NT, class TO, Pro P = Pro::kNone, Epi E = Epi::kStore, int R = 0>
void launch_small(cudaStream_t s, const bf16_t* x, Segs<TO> sg, int n, int in_f, int out_f, int kc,
                  int nw_cap, int pdl, const Fusion& fu = {}) {
  TF_CHECK((kc % Shape<MT, NT, R>::SUB == 0 && n <= 16 * MT));
  Plan p = plan<MT, NT, TO, P, E, R>(n, in_f, out_f, kc, nw_cap, false);
  const int width = E == Epi::kGlu ? 4 * NT : 8 * NT;  // output columns per tile
  sg.tile0[0] = 0;
  for (int i = 0; i < sg.count; ++i)
    sg.tile0[i + 1] = sg.tile0[i] + static_cast<int>(blocks_for(sg.out_f[i], width));
  p.blocks = sg.tile0[sg.count];
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(std::min(p.blocks, resident_blocks<MT, NT, TO, P, E, R>(p))));
  cfg.blockDim = dim3(static_cast<unsigned>(32 * p.nw));
  cfg.dynamicSmemBytes = p.smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl > 0 ? 1 : 0;
  TF_CUDA_CHECK(
      cudaLaunchKernelEx(&cfg, small_kernel<MT, NT, TO, P, E, R>(), x, sg, n, in_f, kc, pdl > 1 ? 1 : 0, fu));
}

// <= 16 rows, the occupancy rule: the widest blocks (32, 16, then 8 columns) that still give >= 64 blocks,
// all resident at once (one wave) and every chunk in one round. Measured on the H200, fewer and wider
// blocks stream faster as long as they cover the SMs in one wave (each block's start, fold and exit cost
// time the weight stream does not hide). Where no width fits one wave (lm_head; gate|up at 16 rows) the
// resident blocks walk the tiles: the width that loads the busiest block least, 16 columns on a tie (the
// fastest of the three for lm_head when each block had one tile). Cached per (n, in_f, out_f, kc, out
// dtype, per fused form).
template <class TO, Pro P = Pro::kNone, Epi E = Epi::kStore, int R = 0>
int plan_nt(int n, int in_f, int out_f, int kc, int nw_cap) {
  static std::mutex mu;
  static std::map<std::array<int, 5>, int> cache;
  const std::array<int, 5> key{n, in_f, out_f, kc, nw_cap};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const int sms = sm_count();
  auto fits = [&](const Plan& p) { return p.blocks >= 64 && p.blocks <= p.per_sm * sms && p.rounds == 1; };
  // Where none fits: the width whose busiest resident block streams the fewest columns (its tiles times
  // their width), 16 on a tie. (The 4B's down_proj, 2,560 columns of 9,216, one 16-warp block per SM: 160
  // 16-column tiles on 132 blocks stream 32 columns in the busiest, 320 8-column tiles 24.)
  auto busiest = [&](const Plan& p, int width) {
    const int res = std::max(1, p.per_sm) * sms;
    return (p.blocks + res - 1) / res * width;
  };
  const Plan p4 = plan<1, 4, TO, P, E, R>(n, in_f, out_f, kc, nw_cap, true);
  const Plan p2 = plan<1, 2, TO, P, E, R>(n, in_f, out_f, kc, nw_cap, true);
  const Plan p1 = plan<1, 1, TO, P, E, R>(n, in_f, out_f, kc, nw_cap, true);
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

}  // namespace tf::cuda::small
