// What the two few-row flash forms share (attention_tc_decode.cu: a ring of K/V tiles, the tile's work split
// among four warps; attention_tc_decode_chunks.cu: chunks of four tiles whose scores and exps run in
// parallel): the block's 16 rows, its query staging and its stores. Row r of a block is query row i0 + r /
// pack of head kh · pack + r % pack (packed: the query heads of one kv head share its K/V tiles) or of head h
// (pack 1). Fragment layout as in mma.cuh: a thread holds rows g and g + 8 (rr = 0, 1) of each 8-wide output
// block.
#pragma once
#include <climits>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"

namespace tf::cuda::attn {

constexpr int kDecRows = 16;  // query rows of a few-row block: one mma row tile

// f(DP, BN) with the padded head_dim dp and its keys per tile as integral constants: 64, 80 and 128 with
// 64-key tiles, else 256 with 32-key tiles (the few-row forms' instantiations).
template <class F>
void with_dec_dims(int dp, F&& f) {
  using I32 = std::integral_constant<int, 32>;
  using I64 = std::integral_constant<int, 64>;
  if (dp == 64)
    f(I64{}, I64{});
  else if (dp == 80)
    f(std::integral_constant<int, 80>{}, I64{});
  else if (dp == 128)
    f(std::integral_constant<int, 128>{}, I64{});
  else
    f(std::integral_constant<int, 256>{}, I32{});
}

struct DecRows {
  int pack, h, kh;  // query heads per block row group, the unpacked head, the packed kv head
  __device__ int q(int r) const { return r / pack; }
  __device__ int head(int r) const { return pack > 1 ? kh * pack + r % pack : h; }
};

// The block's rows into shared memory: q rows (one cp.async group, committed; the caller waits) at stride LD,
// zeros past d and past n_rows; their key ranges into rb / re (INT_MAX / INT_MIN past n_rows; visible after
// the caller's next barrier).
template <int DP, int LD, int THREADS>
__device__ __forceinline__ void stage_dec_rows(bf16_t* qs, int* rb, int* re, const DecRows& R,
                                               const bf16_t* __restrict__ q,
                                               const int32_t* __restrict__ ranges, int64_t i0, int n_rows,
                                               int64_t q_stride, int d) {
  for (int c = threadIdx.x; c < kDecRows * (DP / 8); c += THREADS) {
    const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
    const bool ok = r < n_rows && dc < d;
    mma::cp_async16(qs + r * LD + dc, ok ? q + (i0 + R.q(r)) * q_stride + R.head(r) * d + dc : q, ok);
  }
  mma::cp_async_commit();
  for (int r = threadIdx.x; r < kDecRows; r += THREADS) {
    const bool ok = r < n_rows;
    rb[r] = ok ? ranges[2 * (i0 + R.q(r))] : INT_MAX;
    re[r] = ok ? ranges[2 * (i0 + R.q(r)) + 1] : INT_MIN;
  }
}

// Score blocks b and b + 1 (8 keys each) of S = Q·Kᵀ for the block's 16 query rows (qs, row stride LD)
// against the key tile kt (same stride): each block's mma chain over d in 16-wide steps from zero,
// attention_tc.cu's, into mma's C fragments s0, s1.
template <int DP, int LD>
__device__ __forceinline__ void score_pair(const bf16_t* qs, const bf16_t* kt, int b, int lane,
                                           float (&s0)[4], float (&s1)[4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) s0[c] = s1[c] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < DP; kd += 16) {
    uint32_t af[4], bf[4];
    mma::ldmatrix_x4(af, qs + (lane % 16) * LD + kd + (lane / 16) * 8);
    mma::ldmatrix_x4(bf, kt + (b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kd + ((lane / 8) % 2) * 8);
    mma::mma_bf16(s0, af, bf[0], bf[1]);
    mma::mma_bf16(s1, af, bf[2], bf[3]);
  }
}

// Score block b alone, the same chain as score_pair's: each B load takes two 16-wide k steps (d kd .. kd +
// 31), one where DP ends first.
template <int DP, int LD>
__device__ __forceinline__ void score_one(const bf16_t* qs, const bf16_t* kt, int b, int lane,
                                          float (&s0)[4]) {
#pragma unroll
  for (int c = 0; c < 4; ++c) s0[c] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < DP; kd += 32) {
    uint32_t af[4], bf[4];
    if (kd + 16 < DP) {
      mma::ldmatrix_x4(bf, kt + (b * 8 + (lane % 8)) * LD + kd + (lane / 8) * 8);
    } else {
      uint32_t b2[2];
      mma::ldmatrix_x2(b2, kt + (b * 8 + (lane % 8)) * LD + kd + ((lane / 8) % 2) * 8);
      bf[0] = b2[0];
      bf[1] = b2[1];
    }
    mma::ldmatrix_x4(af, qs + (lane % 16) * LD + kd + (lane / 16) * 8);
    mma::mma_bf16(s0, af, bf[0], bf[1]);
    if (kd + 16 < DP) {
      mma::ldmatrix_x4(af, qs + (lane % 16) * LD + kd + 16 + (lane / 16) * 8);
      mma::mma_bf16(s0, af, bf[2], bf[3]);
    }
  }
}

// A split's (m, l, acc) of a thread's rows into the split-parallel workspace (attention_merge.cu folds them):
// acc[la] is output block block_of(la) (an 8-wide column block of the head, NA of them per thread).
template <int NA, int NO, class BlockOf>
__device__ __forceinline__ void store_dec_partial(const Partials& part, const DecRows& R, const float (&m)[2],
                                                  const float (&l)[2], const float (&acc)[NA][4],
                                                  BlockOf block_of, int64_t i0, int n_rows, int64_t n_q,
                                                  int heads, int d, int r_lo, int r_hi, bool writes_ml) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int la = 0; la < NA; ++la)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int rr = c / 2, a = block_of(la);
      const int r = rr ? r_hi : r_lo;
      const int col = a * 8 + 2 * t + c % 2;
      if (r >= n_rows || a >= NO) continue;
      const int64_t at = (static_cast<int64_t>(blockIdx.z) * n_q + i0 + R.q(r)) * heads + R.head(r);
      if (writes_ml && la == 0 && c % 2 == 0 && t == 0) {
        part.ml[2 * at] = m[rr];
        part.ml[2 * at + 1] = l[rr];
      }
      if (col < d) part.acc[at * d + col] = acc[la][c];
    }
}

// After store_dec_partial, with part.done: the block that stores the last of its column's n_split partials
// (counted on part.done[blockIdx.y * gridDim.x + blockIdx.x], reset to zero by it) folds every split of its
// rows into out with attention_merge.cu's statements (merge_splits), so the bits are the merge launch's. The
// other blocks return. Each thread's stores are fenced before the block's count (the partials of a column's
// earlier blocks are visible to the last one, which reads them past L1).
template <int THREADS>
__device__ __forceinline__ void merge_if_last(const Partials& part, const DecRows& R, int64_t i0, int n_rows,
                                              int64_t n_q, int heads, int d, bf16_t* __restrict__ out) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* count = part.done + static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    last = atomicAdd(count, 1) == part.n_split - 1;
    if (last) *count = 0;  // every split of the column has counted: zero for the next call
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int64_t stride = n_q * heads;
  for (int e = threadIdx.x; e < n_rows * d; e += THREADS) {
    const int r = e / d, col = e % d;
    const int64_t row_head = (i0 + R.q(r)) * heads + R.head(r);
    out[row_head * d + col] = f2bf(merge_splits(part, stride, row_head, d, col));
  }
}

}  // namespace tf::cuda::attn
