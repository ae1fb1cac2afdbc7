// Fixed key splits of the flash attention (attention_tc.cu, attention_tc_wide.cu, attention_merge.cu).
//
// A query row's keys [b, e) are cut into splits of S keys counted from its own range begin b: split z is
// [b + z S, min(e, b + (z + 1) S)), S = 512 at head_dim <= 64, 256 above (split_keys; a multiple of every key
// tile: 64, or 32 at head_dim 256).
// Each split runs the flash tile loop from a fresh state (m = -inf, l = 0, acc = 0) and ends with
// (m_z, l_z, acc_z); the row's result folds the splits left to right:
//
//   empty split (m_z = -inf): no change;
//   first non-empty split:     M = m_z, L = l_z, O = acc_z (a copy);
//   later ones:                M' = max(M, m_z), cr = M' == M ? 1 : 2^((M - M') log2 e),
//                              cs = M' == m_z ? 1 : 2^((m_z - M') log2 e),
//                              L = rn(rn(L cr) + rn(l_z cs)), O = rn(rn(O cr) + rn(acc_z cs)), M = M';
//   out = rnd(L > 0 ? O / L : 0).
//
// A row with at most S keys has one split, whose fold is a copy: its bits are the unsplit kernel's. The
// splits depend on the row's range alone, so a row's bits do not depend on the other rows of the call,
// on how its sequence was chunked, or on which of two ways the call runs them:
// - in one block, folding as it goes (prefill, vision: the running O of each thread's fragment sits in
//   shared memory, private to the thread, so no barrier);
// - one block per split, each writing its (m_z, l_z, acc_z) to a workspace, then attention_merge.cu's
//   kernel folding them in the same order with the same expressions (decode: a one-row sequence's keys
//   spread over several multiprocessors instead of one), or the last of a row group's blocks folding them
//   with those expressions (merge_splits; attention_decode.cuh's merge_if_last), no second launch.
// The products and sums of the fold are written with __fmul_rn / __fadd_rn so that no kernel contracts
// them into an FMA differently from another.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"

namespace tf::cuda::attn {

constexpr int kKeySplit = 512;      // keys per split at head_dim <= 64 (the vision towers)
constexpr int kKeySplitWide = 256;  // at head_dim > 64 (the decoders: more blocks for one decoding row)
// The split of a head_dim: a function of the weights' shapes alone (a test hook or TF_CUDA_ATTENTION_SPLIT
// may set another for every head_dim: attention_tc.cu).
inline int split_keys(int64_t d) { return d > 64 ? kKeySplitWide : kKeySplit; }
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

enum class FoldOp { kSkip, kCopy, kFold };

// Folds a split's (m, l) into the running (M, L); cr / cs are the factors of the running O and of the
// split's acc for kFold (O = fold_o(O, acc, cr, cs)).
__device__ __forceinline__ FoldOp fold_ml(float& M, float& L, float m, float l, float& cr, float& cs) {
  if (m == -INFINITY) return FoldOp::kSkip;
  if (M == -INFINITY) {
    M = m;
    L = l;
    return FoldOp::kCopy;
  }
  const float mn = fmaxf(M, m);
  cr = mn == M ? 1.0f : ex2((M - mn) * kLog2e);
  cs = mn == m ? 1.0f : ex2((m - mn) * kLog2e);
  L = __fadd_rn(__fmul_rn(L, cr), __fmul_rn(l, cs));
  M = mn;
  return FoldOp::kFold;
}

__device__ __forceinline__ float fold_o(float o, float acc, float cr, float cs) {
  return __fadd_rn(__fmul_rn(o, cr), __fmul_rn(acc, cs));
}

// The query rows of flash-attention block `tile` (each block holds up to bq rows): bq consecutive rows, or
// (seg_rows, paged) up to bq rows of ONE segment, tile y being the y-th bq-row piece when every segment is
// cut into pieces of bq from its first row. rows = 0: a grid bound past the last piece. Run by one thread.
__device__ __forceinline__ void find_piece(unsigned tile, int bq, int64_t n_q, const int32_t* seg_rows,
                                           int n_seg, int64_t& i0_out, int& rows_out, int& seg_out) {
  int64_t i0 = static_cast<int64_t>(tile) * bq;
  int rows = static_cast<int>(n_q - i0 < bq ? n_q - i0 : bq), seg = 0;
  if (seg_rows) {
    rows = 0;
    int left = static_cast<int>(tile);
    for (int s = 0; s < n_seg; ++s) {
      const int ns = seg_rows[s + 1] - seg_rows[s], nt = (ns + bq - 1) / bq;
      if (left < nt) {
        seg = s;
        i0 = seg_rows[s] + static_cast<int64_t>(left) * bq;
        rows = static_cast<int>(seg_rows[s + 1] - i0 < bq ? seg_rows[s + 1] - i0 : bq);
        break;
      }
      left -= nt;
    }
  }
  i0_out = i0;
  rows_out = rows > 0 ? rows : 0;
  seg_out = seg;
}

// A block's next pass: the smallest range begin of its n rows above prev_b (INT_MAX: none left) and the
// largest range end among the rows with that begin (rb / re: the rows' ranges, INT_MAX / INT_MIN for rows
// past the last). Run by one thread.
__device__ __forceinline__ void next_pass(const int* rb, const int* re, int n, int prev_b, int& pass_b,
                                          int& pass_e) {
  int nb = INT_MAX, ne = INT_MIN;
  for (int r = 0; r < n; ++r)
    if (rb[r] > prev_b && rb[r] < nb) nb = rb[r];
  for (int r = 0; r < n; ++r)
    if (rb[r] == nb && re[r] > ne) ne = re[r];
  pass_b = nb;
  pass_e = ne;
}

// One key tile's online-softmax step for a thread's two rows (rr = 0: fragment values c = 0, 1; rr = 1: c =
// 2, 3) once the scores s are scaled and masked (-inf) and tmax holds the thread's own maxima: the quad's row
// maxima, the running max m and its factor α (exactly 1 when it does not move), P = 2^((s - m) log2 e) packed
// as bf16 A fragments of 16 keys each, and l = l α + Σ p (each thread's sum over its columns in order, then
// the quad's). Every flash kernel (attention_tc.cu, attention_tc_wide.cu, attention_tc_decode.cu) runs this
// same code, so a row's bits do not depend on which of them computes it; attention_tc_decode_chunks.cu runs
// its four parts (quad_max, advance_max, exp_pack, quad_sum + advance_sum) for several tiles at once.
__device__ __forceinline__ void quad_max(float& x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ void quad_sum(float& x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
}
// The running max m after a tile whose row max is tmax (the quad's), and the factor α of what came before.
__device__ __forceinline__ void advance_max(float& m, float tmax, float& alpha) {
  const float mn = fmaxf(m, tmax);
  alpha = (mn == m) ? 1.0f : ex2((m - mn) * kLog2e);  // exact no-op when nothing new
  m = mn;
}
__device__ __forceinline__ void advance_sum(float& l, float alpha, float tsum) { l = l * alpha + tsum; }
// P = 2^((s - m) log2 e) as bf16 A fragments, and the thread's own row sums (its columns in order).
// INF_TEST false: without the test for s = -inf, for rows whose running max m is > -inf (not -inf, not NaN),
// where it changes no value: s = -inf gives ex2(-inf - m) = ex2(-inf) = +0, the test's value.
template <int NS, bool INF_TEST = true>
__device__ __forceinline__ void exp_pack(const float (&s)[NS][4], const float (&m)[2], float (&tsum)[2],
                                         uint32_t (&pf)[NS / 2][4]) {
#pragma unroll
  for (int b = 0; b < NS; ++b) {
    float p[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float mr = m[c / 2];
      p[c] = INF_TEST && s[b][c] == -INFINITY ? 0.0f : ex2((s[b][c] - mr) * kLog2e);
      tsum[c / 2] += p[c];
    }
    pf[b / 2][(b % 2) * 2 + 0] = mma::pack_bf16(p[0], p[1]);
    pf[b / 2][(b % 2) * 2 + 1] = mma::pack_bf16(p[2], p[3]);
  }
}
// MAY_SKIP_INF_TEST: a warp whose rows all have a running max > -inf takes exp_pack's form without the -inf
// test (the same values; a warp-uniform branch, so the whole warp must be here).
template <int NS, bool MAY_SKIP_INF_TEST = false>
__device__ __forceinline__ void online_softmax(const float (&s)[NS][4], float (&tmax)[2], float (&m)[2],
                                               float (&l)[2], float (&alpha)[2], uint32_t (&pf)[NS / 2][4]) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    quad_max(tmax[rr]);
    advance_max(m[rr], tmax[rr], alpha[rr]);
  }
  float tsum[2] = {0.0f, 0.0f};
  if (MAY_SKIP_INF_TEST && __all_sync(0xffffffffu, m[0] > -INFINITY && m[1] > -INFINITY))
    exp_pack<NS, false>(s, m, tsum, pf);
  else
    exp_pack<NS>(s, m, tsum, pf);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    quad_sum(tsum[rr]);
    advance_sum(l[rr], alpha[rr], tsum[rr]);
  }
}

// The block's query rows into shared memory: rows [i0, i0 + n_rows) of q's head h, their first DP columns
// (zeros past d and past the rows) at row stride LD in qs, and their key ranges into rb / re (INT_MAX /
// INT_MIN past the rows); visible to the whole block on return.
template <int BM, int DP, int LD, int THREADS>
__device__ __forceinline__ void stage_queries(bf16_t* qs, int* rb, int* re, const bf16_t* __restrict__ q,
                                              const int32_t* __restrict__ ranges, int64_t i0, int n_rows,
                                              int64_t q_stride, int h, int d) {
  for (int c = threadIdx.x; c < BM * (DP / 8); c += THREADS) {
    const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
    const bool ok = r < n_rows && dc < d;
    mma::cp_async16(qs + r * LD + dc, ok ? q + (i0 + r) * q_stride + h * d + dc : q, ok);
  }
  mma::cp_async_commit();
  for (int r = threadIdx.x; r < BM; r += THREADS) {
    const bool ok = r < n_rows;
    rb[r] = ok ? ranges[2 * (i0 + r)] : INT_MAX;
    re[r] = ok ? ranges[2 * (i0 + r) + 1] : INT_MIN;
  }
  mma::cp_async_wait<0>();
  __syncthreads();
}

// The tile's scores of a thread's two rows (rr = 0: s[b][0..1], rr = 1: s[b][2..3]; keys j0 + 8b + 2t + c %
// 2): scaled, -inf where the key is not live for the row (in[rr]: the row's range begins at the pass's start,
// e[rr]: its end), each row's max in tmax. full: every key of the tile is live for both rows, the masked
// path's s * scale without the tests.
template <int NS>
__device__ __forceinline__ void scale_mask(float (&s)[NS][4], bool full, int j0, const bool (&in)[2],
                                           const int (&e)[2], float scale, int t, float (&tmax)[2]) {
  if (full) {
#pragma unroll
    for (int b = 0; b < NS; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        s[b][c] = s[b][c] * scale;
        tmax[c >= 2] = fmaxf(tmax[c >= 2], s[b][c]);
      }
  } else {
#pragma unroll
    for (int b = 0; b < NS; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = j0 + b * 8 + 2 * t + c % 2;  // < pass end + 64: fits (ranges are i32)
        const bool hi = c >= 2;
        const bool ok = hi ? (in[1] && j < e[1]) : (in[0] && j < e[0]);
        s[b][c] = ok ? s[b][c] * scale : -INFINITY;
        tmax[hi] = fmaxf(tmax[hi], s[b][c]);
      }
  }
}

// The running O of a thread's two rows times the tile's rescale factors (online_softmax's alpha).
template <int NO>
__device__ __forceinline__ void rescale(float (&acc)[NO][4], const float (&alpha)[2]) {
#pragma unroll
  for (int a = 0; a < NO; ++a) {
    acc[a][0] *= alpha[0];
    acc[a][1] *= alpha[0];
    acc[a][2] *= alpha[1];
    acc[a][3] *= alpha[1];
  }
}

// Folds the split just ended of one mma fragment (a thread's two rows rr = 0, 1: m, l, and acc[NO][4],
// columns c = 0, 1 of row 0 and 2, 3 of row 1) into the rows' running (M, L) and the running O in shared
// memory, o[(a * 4 + c) * stride]; then starts the next split from a fresh state (m = -inf, l = 0, acc = 0).
template <int NO>
__device__ __forceinline__ void fold_fragment(float (&M)[2], float (&L)[2], float (&m)[2], float (&l)[2],
                                              float (&acc)[NO][4], float* o, int stride) {
  FoldOp op[2];
  float cr[2] = {0.0f, 0.0f}, cs[2] = {0.0f, 0.0f};
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    op[rr] = fold_ml(M[rr], L[rr], m[rr], l[rr], cr[rr], cs[rr]);
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
  }
#pragma unroll
  for (int a = 0; a < NO; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int rr = c / 2;
      float& oc = o[(a * 4 + c) * stride];
      if (op[rr] == FoldOp::kCopy) oc = acc[a][c];
      if (op[rr] == FoldOp::kFold) oc = fold_o(oc, acc[a][c], cr[rr], cs[rr]);
      acc[a][c] = 0.0f;
    }
}

// The split-parallel form's workspace (attention_merge.cu): for split z, row i, head h:
// ml[((z * n_q + i) * heads + h) * 2 + {0, 1}] = (m, l), acc[((z * n_q + i) * heads + h) * d + col].
// done (the few-row forms, attention_decode.cuh's merge_if_last): one counter per (piece, head group) block
// column, zero between calls; the block that finishes a column's splits last folds them itself, so no merge
// launch follows. Null: attention_merge.cu's kernel folds them.
struct Partials {
  float* ml = nullptr;
  float* acc = nullptr;
  int n_split = 0;  // blocks per (rows, head) along the keys: gridDim.z
  int* done = nullptr;
};

// The fold of one (row, head) entry's splits z = 0 .. n_split - 1 at column col, in split order, divided by
// its L: the value out rounds (row_head = i * heads + h; stride = n_q * heads, one split's entries). The
// loads bypass L1 (another block of the same grid may have written them: merge_if_last).
// The splits' loads are issued kMergeBatch at a time before their folds (one L2 round trip per batch
// instead of one per split; the folds in split order as before).
constexpr int kMergeBatch = 8;
__device__ __forceinline__ float merge_splits(const Partials& part, int64_t stride, int64_t row_head, int d,
                                              int col) {
  float M = -INFINITY, L = 0.0f, O = 0.0f;
  for (int z0 = 0; z0 < part.n_split; z0 += kMergeBatch) {
    float mz[kMergeBatch], lz[kMergeBatch], az[kMergeBatch];
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) {
      const int64_t at = (z0 + u) * stride + row_head;
      const bool live = z0 + u < part.n_split;
      mz[u] = live ? __ldcg(part.ml + 2 * at) : 0.0f;
      lz[u] = live ? __ldcg(part.ml + 2 * at + 1) : 0.0f;
      az[u] = live ? __ldcg(part.acc + at * d + col) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) {
      if (z0 + u >= part.n_split) break;
      float cr = 0.0f, cs = 0.0f;
      const FoldOp op = fold_ml(M, L, mz[u], lz[u], cr, cs);
      if (op == FoldOp::kCopy) O = az[u];
      if (op == FoldOp::kFold) O = fold_o(O, az[u], cr, cs);
    }
  }
  return L > 0.0f ? O / L : 0.0f;
}

}  // namespace tf::cuda::attn

namespace tf::cuda {

// attention_merge.cu: the current device's partials workspace when it holds `floats` floats (allocated once,
// at the first call outside a stream capture, and never moved: captured graphs keep its address), else null.
float* attention_partials(cudaStream_t s, int64_t floats);
// attention_merge.cu: the current device's zeroed merge counters when `n` fit (the same allocation rules),
// else null.
int* attention_merge_counters(cudaStream_t s, int64_t n);
// attention_tc_decode.cu: attention_tc.cu's arithmetic in blocks of <= 16 rows whose four warps share each
// key tile (calls of few rows per sequence); dp: head_dim padded (64, 80, 128, 256); the splits, partials and
// packing as attention_tc.cu's launch chose them (the caller merges the partials).
void launch_attention_tc_decode(int dp, cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                                const int32_t* ranges, float scale, bf16_t* out, int64_t n_q, int64_t n_k,
                                int heads, int kv_heads, int d, const AttentionPaging& pg, int split_tiles,
                                bool folding, const attn::Partials& part, int pack);
// attention_tc_decode_chunks.cu: the same rows and results for calls that do not fold in the block, key tiles
// in chunks of four whose scores and exps run in parallel; grid as attention_tc_decode.cu's.
void launch_attention_tc_decode_chunks(int dp, cudaStream_t s, dim3 grid, const bf16_t* q, const bf16_t* k,
                                       const bf16_t* v, const int32_t* ranges, float scale, bf16_t* out,
                                       int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                                       const AttentionPaging& pg, int split_tiles, const attn::Partials& part,
                                       int pack);
// out[n_q, heads, d] (bf16) = the fold of part's n_split splits per (row, head), in split order.
void launch_attention_merge(cudaStream_t s, const attn::Partials& part, int64_t n_q, int heads, int d,
                            bf16_t* out);

}  // namespace tf::cuda
