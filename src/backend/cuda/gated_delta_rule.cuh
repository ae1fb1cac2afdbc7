// Gated delta rule device code shared by the one-sequence kernels (gated_delta_rule.cu), the kernels
// over all segments of a step on a pool of slots (gated_delta_rule_slots.cu) and the chunked form's two
// launches (gated_delta_rule_chunks.cu): the CPU reference's arithmetic statement by statement, so all
// give the CPU's bits. Included by those files only.
#pragma once
#include "backend/cuda/common.cuh"
#include "backend/op_checks.h"

namespace tf::cuda::gdr {

using Dims = opcheck::DeltaRuleDims;

constexpr int kChunk = 64, kThreads = 256;

// q, k rows of head h (key head h / ratio) for tokens [t0, t0 + L): normalised (x * 1/sqrt(Σx² +
// 1e-6)), q then scaled (multiply by `mul`, or divide by `div` when divide is set). qs, ks [L, dk]. The
// rows are first staged in qs / ks as f32 by the whole block (every load in flight at once), then the
// norms' sums (dot8's order) and the scaling run from there: the same values, the same operations; a
// barrier first and last, as the callers loop over tokens on the same buffers. (The norms' two threads
// reading global memory one dependent element at a time made a decode token's call wait on ~128 round
// trips.)
template <class T>
__device__ void load_qk(const Dims& d, const T* q, const T* k, int64_t h, int64_t t0, int L, bool divide,
                        float mul, float div, float* qs, float* ks) {
  __shared__ float inv_q[kChunk], inv_k[kChunk];
  const int64_t kh = h / d.ratio;
  const int dk = static_cast<int>(d.dk);
  __syncthreads();  // the previous token's qs / ks may still be read
  for (int e = threadIdx.x; e < L * dk; e += blockDim.x) {
    const int i = e / dk, c = e - i * dk;
    const int64_t src = ((t0 + i) * d.hk + kh) * d.dk + c;
    qs[e] = to_f(q[src]);
    ks[e] = to_f(k[src]);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < 2 * L; r += blockDim.x) {
    const int i = r % L;
    const float* x = (r < L ? qs : ks) + i * dk;
    const float ss = dot8(x, x, d.dk);
    (r < L ? inv_q : inv_k)[i] = 1.0f / sqrtf(ss + 1e-6f);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * dk; e += blockDim.x) {
    const int i = e / dk;
    const float qn = qs[e] * inv_q[i];
    qs[e] = divide ? qn / div : qn * mul;
    ks[e] = ks[e] * inv_k[i];
  }
  __syncthreads();
}

// Where a call writes the states it keeps (ops.h *_slots): after the row at position p with
// (p + 1) % step == 0, head h's S goes to keep + j * stride + h * dk * dv, j = (p + 1) / step -
// pos0 / step - 1 (the j-th kept row of the call). keep null: nothing kept (the one-sequence ops).
struct KeepPlan {
  float* keep = nullptr;
  int64_t pos0 = 0, step = 1, stride = 0;
  // Head h's kept state after the row at position pos0 + t, or null when that row keeps nothing.
  __device__ float* at(int64_t t, int64_t h, int64_t head_elems) const {
    const int64_t p = pos0 + t + 1;
    if (!keep || p % step) return nullptr;
    return keep + (p / step - pos0 / step - 1) * stride + h * head_elems;
  }
};

// Segment s of a call's table segs[n_seg, 6] (ops.h *_slots: first row, end row, state slot, position of the
// first row, first kept state or -1, keep step); segs null: the call's n rows as one segment on slot 0 from
// position 0, nothing kept (the one-sequence ops).
struct SegRow {
  int64_t r0 = 0, n = 0, slot = 0, pos0 = 0;
  int32_t keep_idx = -1, keep_step = 1;
};
__device__ inline SegRow read_seg_row(const int32_t* segs, int64_t s, int64_t n) {
  SegRow g;
  if (!segs) {
    g.n = n;
    return g;
  }
  const int32_t* r = segs + s * 6;
  g.r0 = r[0];
  g.n = r[1] - r[0];
  g.slot = r[2];
  g.pos0 = r[3];
  g.keep_idx = r[4];
  g.keep_step = r[5] > 0 ? r[5] : 1;
  return g;
}
// The segment's keep plan over keep[n_keep, ...] with `stride` floats per kept state (null: nothing kept).
__device__ inline KeepPlan keep_plan(const SegRow& g, float* keep, int64_t stride) {
  KeepPlan kp;
  kp.keep = keep && g.keep_idx >= 0 ? keep + g.keep_idx * stride : nullptr;
  kp.pos0 = g.pos0;
  kp.step = g.keep_step;
  kp.stride = stride;
  return kp;
}

// The recurrent form's blocks: one per (value head, kRecCols state columns), kRecThreads threads; dynamic
// shared memory recurrent_smem(d) bytes: qs, ks [dk] and the block's state columns St [dk, cols].
constexpr int kRecThreads = 128;
__host__ __device__ inline int recurrent_cols(const Dims& d) {
  int cols = 32;  // within the default 48 KB of shared memory
  while (cols > 1 && (2 + cols) * d.dk * 4 > 48 * 1024) cols /= 2;
  return cols;
}
inline size_t recurrent_smem(const Dims& d) {
  return static_cast<size_t>(2 + recurrent_cols(d)) * static_cast<size_t>(d.dk) * sizeof(float);
}

// State columns [c0, c0 + cols) of value head h over the call's tokens [0, d.n), token by token. q..out
// point at the call's first row; S [dk, dv] is the head's state. The columns are independent (every term
// of the recurrence is column by column), so a block holds its columns of S for the whole call, its first
// `cols` threads each run one column's sums (the CPU reference's order, row by row), and all its threads
// load, keep and store the columns. DK > 0 (dk == DK): each column lives in its thread's registers, the
// sums unrolled; DK == 0: in shared memory (St). The same operations in the same order either way.
template <int DK, class T>
__device__ void recurrent_head_t(const Dims& d, int64_t h, int64_t c0, const T* q, const T* k, const T* v,
                                 const float* g, const T* beta, float* S, T* out, float* sm, float div,
                                 const KeepPlan& kp) {
  const int cols = recurrent_cols(d);
  const int cw = static_cast<int>(d.dv - c0 < cols ? d.dv - c0 : cols);
  const int c = static_cast<int>(threadIdx.x);
  const bool mine = c < cw;
  float *qs = sm, *ks = sm + d.dk, *St = sm + 2 * d.dk;  // St[i * cols + c] = S[i, c0 + c]
  float reg[DK > 0 ? DK : 1];
  if constexpr (DK > 0) {  // the column straight to its thread's registers: DK independent loads in flight
    if (mine)
#pragma unroll
      for (int i = 0; i < DK; ++i) reg[i] = S[i * d.dv + c0 + c];
  } else {
    for (int64_t e = threadIdx.x; e < d.dk * cw; e += blockDim.x)
      St[(e / cw) * cols + e % cw] = S[(e / cw) * d.dv + c0 + e % cw];
    __syncthreads();
  }
  for (int64_t t = 0; t < d.n; ++t) {
    load_qk(d, q, k, h, t, 1, /*divide=*/true, 0.0f, div, qs, ks);  // synchronizes before and after
    const float decay = exp_f(g[t * d.hv + h]), bt = to_f(beta[t * d.hv + h]);
    if (mine) {
      float mem = 0.0f, o = 0.0f;
      if constexpr (DK > 0) {
#pragma unroll
        for (int i = 0; i < DK; ++i) {
          reg[i] *= decay;
          mem += reg[i] * ks[i];
        }
        const float delta = (to_f(v[(t * d.hv + h) * d.dv + c0 + c]) - mem) * bt;
#pragma unroll
        for (int i = 0; i < DK; ++i) {
          reg[i] += ks[i] * delta;
          o += reg[i] * qs[i];
        }
      } else {
        for (int64_t i = 0; i < d.dk; ++i) {
          St[i * cols + c] *= decay;
          mem += St[i * cols + c] * ks[i];
        }
        const float delta = (to_f(v[(t * d.hv + h) * d.dv + c0 + c]) - mem) * bt;
        for (int64_t i = 0; i < d.dk; ++i) {
          St[i * cols + c] += ks[i] * delta;
          o += St[i * cols + c] * qs[i];
        }
      }
      out[(t * d.hv + h) * d.dv + c0 + c] = from_f<T>(o);
    }
    if (float* kept = kp.at(t, h, d.dk * d.dv)) {  // the same for every thread of the block
      if constexpr (DK > 0) {
        if (mine)
#pragma unroll
          for (int i = 0; i < DK; ++i) kept[i * d.dv + c0 + c] = reg[i];
      } else {
        __syncthreads();
        for (int64_t e = threadIdx.x; e < d.dk * cw; e += blockDim.x)
          kept[(e / cw) * d.dv + c0 + e % cw] = St[(e / cw) * cols + e % cw];
      }
    }
  }
  if constexpr (DK > 0) {
    if (mine)
#pragma unroll
      for (int i = 0; i < DK; ++i) S[i * d.dv + c0 + c] = reg[i];
  } else {
    __syncthreads();
    for (int64_t e = threadIdx.x; e < d.dk * cw; e += blockDim.x)
      S[(e / cw) * d.dv + c0 + e % cw] = St[(e / cw) * cols + e % cw];
  }
}

// Qwen3.5's dk (128) with the columns in registers; any other in shared memory.
template <class T>
__device__ void recurrent_head(const Dims& d, int64_t h, int64_t c0, const T* q, const T* k, const T* v,
                               const float* g, const T* beta, float* S, T* out, float* sm, float div,
                               const KeepPlan& kp) {
  if (d.dk == 128)
    recurrent_head_t<128>(d, h, c0, q, k, v, g, beta, S, out, sm, div, kp);
  else
    recurrent_head_t<0>(d, h, c0, q, k, v, g, beta, S, out, sm, div, kp);
}

// ---- the chunked form's chunks and scratch (gated_delta_rule_chunks.cu, gated_delta_rule_chunks_tc.cu) ----
// A segment's chunks are counted from its first position pos0: the first ends at the next multiple of 64.
__device__ inline int64_t n_chunks(const SegRow& g) {
  return g.n <= 0 ? 0 : (g.pos0 + g.n - 1) / kChunk - g.pos0 / kChunk + 1;
}

// Rows [c0, c0 + L) of the segment (relative to its first row) are its chunk j.
__device__ inline void chunk_rows(const SegRow& g, int64_t j, int64_t& c0, int& L) {
  const int64_t first = kChunk - g.pos0 % kChunk;
  c0 = j == 0 ? 0 : first + (j - 1) * kChunk;
  const int64_t len = j == 0 ? first : kChunk;
  L = static_cast<int>(len < g.n - c0 ? len : g.n - c0);
}

// The call's chunk fc (chunks counted over the segments in order): false past the last one; else its
// segment in sg and fc made the chunk's index within it.
__device__ inline bool locate_chunk(const int32_t* segs, int64_t n_seg, int64_t n, int64_t& fc, SegRow& sg) {
  for (int64_t s = 0; s < n_seg; ++s) {
    sg = read_seg_row(segs, s, n);
    const int64_t c = n_chunks(sg);
    if (fc < c) return true;
    fc -= c;
  }
  return false;
}

// The call's index of segment s's first chunk.
__device__ inline int64_t first_chunk(const int32_t* segs, int64_t s, int64_t n) {
  int64_t first = 0;
  for (int64_t t = 0; t < s; ++t) first += n_chunks(read_seg_row(segs, t, n));
  return first;
}

// Per (chunk, head) f32 scratch: uv [C, dv], uk, qe, kd [C, dk], aq [C, C], cum [C].
struct ChunkScratch {
  float *uv, *uk, *qe, *kd, *aq, *cum;
};
__host__ __device__ inline int64_t scratch_per_chunk(int64_t dk, int64_t dv) {
  return kChunk * (dv + 3 * dk) + kChunk * kChunk + kChunk;
}
__device__ inline ChunkScratch scratch_at(float* base, int64_t fc, int64_t h, const Dims& d) {
  ChunkScratch c;
  c.uv = base + (fc * d.hv + h) * scratch_per_chunk(d.dk, d.dv);
  c.uk = c.uv + kChunk * d.dv;
  c.qe = c.uk + kChunk * d.dk;
  c.kd = c.qe + kChunk * d.dk;
  c.aq = c.kd + kChunk * d.dk;
  c.cum = c.aq + kChunk * kChunk;
  return c;
}

// The chunked form on tensor cores (gated_delta_rule_chunks_tc.cu) into the same scratch (chunk_bound
// chunks): false, launching nothing, for head dims it does not take (dk or dv not a multiple of 16, dk >
// 128, dv > 256).
bool launch_chunked_rule_tc(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& g, const Tensor& beta, float* states, const int32_t* segs,
                            int64_t n_seg, const Tensor& out, float* keep, float mul, float* scratch,
                            int64_t chunk_bound);

// The chunked form over a call's segments (gated_delta_rule_chunks.cu): segs [n_seg, 6] on the device as
// gated_delta_rule_slots.cu reads it, or null for the call's rows as one segment on `states` from position
// 0; keep null: nothing kept. mul: the query multiplier.
void launch_chunked_rule(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& g, const Tensor& beta, float* states, const int32_t* segs,
                         int64_t n_seg, const Tensor& out, float* keep, float mul);

}  // namespace tf::cuda::gdr
