// The chunked gated delta rule (prefill, multi-token calls) on tensor cores: gated_delta_rule_chunks.cu's two
// launches, chunks, scratch and formulas, with every matrix product on mma.sync at about f32 accuracy:
//   1. prep, one block per (value head, chunk of 64 rows): q, k normalised (the CPU's sums, q times mul);
//      the decay cumsum c and P[i][j] = exp(c_i - c_j) (j <= i); A = (kβ kᵀ)∘P below the diagonal and
//      aq = (q kᵀ)∘P on and below it (tensor cores); U = (I + A)⁻¹ [vβ | kβ∘exp(c)] by the CPU's forward
//      substitution (a thread per column, rows in order); into the scratch: U_v, U_k, q∘exp(c),
//      k∘exp(c_last - c), aq and exp(c_last), every array a full 64 rows (zeros past the chunk's L rows), so
//      the scan needs no masks;
//   2. scan, one block per (value head, segment, NC value columns), the segment's chunks in order:
//        v' = U_v - U_k S;   o = (q∘e^c) S + aq v';   S = S e^{c_last} + (k∘e^{c_last - c})ᵀ v'
//      (tensor cores; the two products of o summed apart and then added, and the state's decay and update
//      added, where the CPU rounds them), with the chunk's scratch streamed into shared memory by cp.async in
//      three groups, each issued as soon as the previous chunk's use of its buffer ends.
// The products: f32 operands in two tf32 pieces (mma_tf32.cuh, ~2^-21 per product), each 8-wide k step's
// products summed by the tensor core from zero and then added to the running sum by an f32 addition. Letting
// the tensor core carry the sum across steps instead truncates where f32 rounds to nearest, a bias the tiny
// bf16 goldens saw (Qwen35Golden's untied text-only lm_head, cos 0.99973 against 0.99991 with the CPU's
// arithmetic; with the steps added in f32 every golden stage equals the CPU-exact kernels' to the printed
// digits; three tf32 pieces changed nothing there and cost 3-5 ms of a 0.8B page).
// Not the CPU's bits: held to the CPU reference by the tolerance in
// tests/unit/backend/cuda_contract_qwen_test.cpp (GatedDeltaRuleChunkedTc). Within CUDA every value is fixed
// by the chunk's rows and the state it starts from: an element of a product is one chain of instructions
// over k in a fixed order whatever tile computed it, and NC (chosen by the call's size) only decides which
// block computes which columns. So a segment's bits do not depend on the other segments of the call, and a
// call cut at multiples of 64 positions gives the bits of one call (the contract checks both).
//
// Shapes: q, k [n, hk, dk], v [n, hv, dv], g [n, hv] f32, beta [n, hv]; states [slots, hv, dk, dv] f32;
// out [n, hv, dv]. dk, dv multiples of 16, dk <= 128, dv <= 256.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_delta_rule.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/mma_tf32.cuh"
#include "backend/cuda/once_per_device.h"

namespace tf::cuda::gdr {
namespace {

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::F32A;
using mma::mma_f32;

constexpr int kWarps = kThreads / 32;  // 8
constexpr int P = 2;                   // tf32 pieces per f32 operand (mma_tf32.cuh)
constexpr int kMaxDk = 128;            // the prep keeps a thread's kβ∘exp(c) values in registers
constexpr int kMaxDv = 256;

// Row strides (floats) free of bank conflicts for the fragment loads: a matrix read as an mma A operand
// (lanes at rows g, columns t) wants a stride of 4 mod 8; one read as a B operand or transposed (lanes at
// rows t, columns g) 8 mod 16.
__host__ __device__ constexpr int ld_a(int n) { return n + 4; }
__host__ __device__ constexpr int ld_b(int n) { return n + 8; }

// acc[NT] (rows m0 .. m0 + 15, columns n0 + 8 nt ..) += A · B over k in [0, K) step 8, A(r, k) and B(k, n)
// read through the accessors: each step's products from zero on the tensor core, then one f32 addition. The
// warp's A fragment is split once per k step for its NT column tiles.
template <int NT, class FA, class FB>
__device__ __forceinline__ void warp_mma(float (&acc)[NT][4], int m0, int n0, int K, FA a, FB b) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 8) {
    const float af[4] = {a(m0 + g, k0 + t), a(m0 + g + 8, k0 + t), a(m0 + g, k0 + t + 4),
                         a(m0 + g + 8, k0 + t + 4)};
    const F32A<P> as(af);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int n = n0 + 8 * nt + g;
      float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // the step's products from zero, then one f32 addition
      mma_f32<P>(st, as, b(k0 + t, n), b(k0 + t + 4, n));
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[nt][c] += st[c];
    }
  }
}

// C-fragment element c of tile nt: its row and column.
__device__ __forceinline__ int frag_row(int m0, int c) {
  return m0 + (threadIdx.x % 32) / 4 + (c >= 2 ? 8 : 0);
}
__device__ __forceinline__ int frag_col(int n0, int nt, int c) {
  return n0 + 8 * nt + 2 * (threadIdx.x % 4) + (c & 1);
}

// ---- prep ----------------------------------------------------------------------------------------
// Dynamic shared memory (floats): qs, ks [C][ld_a(dk)] (later U [C][ld_b(dk + dv)] over the same floats),
// A [C][ld_a(C)], P [C][C + 1].
__host__ __device__ int64_t prep_tc_floats(int64_t dk, int64_t dv) {
  const int64_t qk = 2 * ld_a(static_cast<int>(dk)), u = ld_b(static_cast<int>(dk + dv));
  return kChunk * (qk > u ? qk : u) + kChunk * ld_a(kChunk) + kChunk * (kChunk + 1);
}

// grid (hv, a bound on the call's chunks); blocks past the last chunk return.
template <class T>
__global__ void __launch_bounds__(kThreads, 2)
    prep_tc_kernel(Dims d, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   const float* __restrict__ g, const T* __restrict__ beta, const int32_t* segs,
                   int64_t n_seg, float* scratch, float mul) {
  extern __shared__ __align__(16) float sm[];
  __shared__ float cum[kChunk], B[kChunk], ec[kChunk], el[kChunk], inv[2][kChunk];
  const int h = blockIdx.x, dk = static_cast<int>(d.dk), dv = static_cast<int>(d.dv), wu = dk + dv;
  const int kh = h / static_cast<int>(d.ratio);
  const int warp = threadIdx.x / 32;
  int64_t fc = blockIdx.y;
  SegRow sg;
  if (!locate_chunk(segs, n_seg, d.n, fc, sg)) return;
  int64_t c0 = 0;
  int L = 0;
  chunk_rows(sg, fc, c0, L);
  const ChunkScratch sc = scratch_at(scratch, blockIdx.y, h, d);
  const int64_t r0 = sg.r0 + c0;  // the chunk's first row in the call
  const int lq = ld_a(dk), lu = ld_b(wu), la = ld_a(kChunk), lp = kChunk + 1;
  float* qs = sm;                                         // [C][lq]
  float* ks = qs + kChunk * lq;                           // [C][lq]
  float* U = sm;                                          // [C][lu], once qs / ks are done with
  float* At = sm + kChunk * (2 * lq > lu ? 2 * lq : lu);  // [C][la]: A transposed, At[j][i] = A[i][j]
  float* Pm = At + kChunk * la;                           // [C][lp]

  // q, k rows as f32 (zeros past L); the decay cumsum (torch's CPU cumsum: a double accumulator, each prefix
  // rounded to f32, as the CPU reference), beta.
  for (int e = threadIdx.x; e < kChunk * dk; e += kThreads) {
    const int i = e / dk, c = e - i * dk;
    float qv = 0.0f, kv = 0.0f;
    if (i < L) {
      const int64_t src = ((r0 + i) * d.hk + kh) * d.dk + c;
      qv = to_f(q[src]);
      kv = to_f(k[src]);
    }
    qs[i * lq + c] = qv;
    ks[i * lq + c] = kv;
  }
  if (threadIdx.x == 0) {
    double acc = 0.0;
    for (int i = 0; i < kChunk; ++i)
      cum[i] = i < L ? static_cast<float>(acc += g[(r0 + i) * d.hv + h]) : 0.0f;
  }
  for (int i = threadIdx.x; i < kChunk; i += kThreads) B[i] = i < L ? to_f(beta[(r0 + i) * d.hv + h]) : 0.0f;
  __syncthreads();
  // Norms: x * 1/sqrt(Σx² + 1e-6), the CPU's sum (dot8's lanes), a thread per row.
  for (int r = threadIdx.x; r < 2 * kChunk; r += kThreads) {
    const float* x = (r < kChunk ? qs : ks) + (r % kChunk) * lq;
    inv[r / kChunk][r % kChunk] = 1.0f / sqrtf(dot8(x, x, dk) + 1e-6f);
  }
  for (int i = threadIdx.x; i < kChunk; i += kThreads) {
    ec[i] = i < L ? exp_f(cum[i]) : 0.0f;
    el[i] = i < L ? exp_f(cum[L - 1] - cum[i]) : 0.0f;
  }
  for (int e = threadIdx.x; e < kChunk * kChunk; e += kThreads) {
    const int i = e / kChunk, j = e % kChunk;
    Pm[i * lp + j] = (j <= i && i < L) ? exp_f(cum[i] - cum[j]) : 0.0f;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kChunk * dk; e += kThreads) {
    const int i = e / dk, c = e - i * dk;
    qs[i * lq + c] = (qs[i * lq + c] * inv[0][i]) * mul;
    ks[i * lq + c] = ks[i * lq + c] * inv[1][i];
  }
  __syncthreads();

  // A = (kβ kᵀ)∘P (j < i) into shared memory, aq = (q kᵀ)∘P (j <= i) into the scratch, kβ = k∘β rounded
  // first as the CPU's products take it: warp w takes rows 16 (w / 2) .., columns 32 (w % 2) .. (four
  // 8-column tiles) of both.
  {
    const int m0 = 16 * (warp / 2), n0 = 32 * (warp % 2);
    float kk[4][4] = {}, qk[4][4] = {};
    auto kt = [&](int kx, int n) { return ks[n * lq + kx]; };         // B(k, n) = k_n[k]
    auto kb = [&](int r, int kx) { return ks[r * lq + kx] * B[r]; };  // A(i, k) = k_i[k] β_i
    auto qa = [&](int r, int kx) { return qs[r * lq + kx]; };         // A(i, k) = q_i[k]
    warp_mma<4>(kk, m0, n0, dk, kb, kt);
    warp_mma<4>(qk, m0, n0, dk, qa, kt);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = frag_row(m0, c), j = frag_col(n0, nt, c);
        const float p = Pm[i * lp + j];
        At[j * la + i] = j < i ? kk[nt][c] * p : 0.0f;
        sc.aq[i * kChunk + j] = qk[nt][c] * p;  // zero above the diagonal and past L (P is)
      }
  }
  // q∘exp(c), k∘exp(c_last - c) into the scratch; this thread's kβ∘exp(c) values into registers.
  constexpr int kR = kMaxDk * kChunk / kThreads;
  float kr[kR];
#pragma unroll
  for (int m = 0; m < kR; ++m) {
    const int e = threadIdx.x + m * kThreads, i = e / dk, c = e - i * dk;
    if (e >= kChunk * dk) break;
    const float kx = ks[i * lq + c];
    sc.qe[e] = qs[i * lq + c] * ec[i];
    sc.kd[e] = kx * el[i];
    kr[m] = (kx * B[i]) * ec[i];
  }
  if (threadIdx.x == 0) sc.cum[0] = exp_f(cum[L - 1]);  // the scan's decay of the state over the chunk
  __syncthreads();                                      // every read of qs / ks is done: U takes their floats
  // U = [vβ | kβ∘exp(c)] (rows past L zero), then solved in place.
#pragma unroll
  for (int m = 0; m < kR; ++m) {
    const int e = threadIdx.x + m * kThreads, i = e / dk, c = e - i * dk;
    if (e >= kChunk * dk) break;
    U[i * lu + dv + c] = kr[m];
  }
  for (int e = threadIdx.x; e < kChunk * dv; e += kThreads) {
    const int i = e / dv, c = e - i * dv;
    U[i * lu + c] = i < L ? to_f(v[((r0 + i) * d.hv + h) * d.dv + c]) * B[i] : 0.0f;
  }
  __syncthreads();
  // The forward substitution as the CPU runs it: a thread per column, u_i = b_i - Σ_{j<i} A[i][j] u_j over
  // increasing j for every row. Rows go eight at a time: their sums over the rows above the eight share each
  // u_j load and read A[i0 .. i0 + 7][j] as two float4 (At), then the eight finish among themselves in order;
  // every row's statements and their order are the CPU's.
  constexpr int kBand = 8;
  for (int e = threadIdx.x; e < wu; e += kThreads)
    for (int i0 = 0; i0 < kChunk && i0 < L; i0 += kBand) {
      float x[kBand];
#pragma unroll
      for (int r = 0; r < kBand; ++r) x[r] = U[(i0 + r) * lu + e];
      for (int j = 0; j < i0; ++j) {
        const float uj = U[j * lu + e];
        const float4 a0 = *reinterpret_cast<const float4*>(At + j * la + i0);
        const float4 a1 = *reinterpret_cast<const float4*>(At + j * la + i0 + 4);
        const float a[kBand] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
        for (int r = 0; r < kBand; ++r) x[r] -= a[r] * uj;
      }
#pragma unroll
      for (int r = 1; r < kBand; ++r)
#pragma unroll
        for (int q = 0; q < r; ++q) x[r] -= At[(i0 + q) * la + i0 + r] * x[q];
#pragma unroll
      for (int r = 0; r < kBand; ++r) U[(i0 + r) * lu + e] = x[r];
    }
  __syncthreads();
  for (int e = threadIdx.x; e < kChunk * wu; e += kThreads) {
    const int i = e / wu, c = e - i * wu;
    if (c < dv)
      sc.uv[i * dv + c] = U[i * lu + c];
    else
      sc.uk[i * dk + c - dv] = U[i * lu + c];
  }
}

// ---- scan ----------------------------------------------------------------------------------------
// Dynamic shared memory (floats): uk, qe [C][ld_a(dk)], kd [C][ld_b(dk)], aq [C][ld_a(C)], uv, vp
// [C][ld_b(NC)], S [dk][ld_b(NC)], the chunk's decay (4).
__host__ __device__ int64_t scan_tc_floats(int64_t dk, int nc) {
  const int d = static_cast<int>(dk);
  return kChunk * (2 * ld_a(d) + ld_b(d) + ld_a(kChunk) + 2 * ld_b(nc)) + dk * ld_b(nc) + 4;
}

// grid (hv, n_seg, dv / NC): block (h, s, z) carries value columns [NC z, NC z + NC) of head h's state
// through segment s's chunks. Warps: v' and o, rows 16 (w / 2) .., columns NC / 2 (w % 2) ..; the state
// update, (16-row block, column half) pairs w, w + 8, ...
template <class T, int NC>
__global__ void __launch_bounds__(kThreads)
    scan_tc_kernel(Dims d, const int32_t* segs, float* states, T* out, float* keep, const float* scratch) {
  constexpr int NT = NC / 16;  // 8-column tiles per warp
  extern __shared__ __align__(16) float sm[];
  const int h = blockIdx.x, dk = static_cast<int>(d.dk), dv = static_cast<int>(d.dv);
  const int64_t s = blockIdx.y;
  const int c_lo = static_cast<int>(blockIdx.z) * NC;
  const int warp = threadIdx.x / 32;
  const SegRow sg = read_seg_row(segs, s, d.n);
  if (sg.n <= 0) return;
  const int64_t first = first_chunk(segs, s, d.n), nch = n_chunks(sg);
  const int64_t hs = d.hv * d.dk * d.dv;
  float* Sg = states + sg.slot * hs + h * d.dk * d.dv;
  const KeepPlan kp = keep_plan(sg, keep, hs);
  const int lk = ld_a(dk), ld = ld_b(dk), la = ld_a(kChunk), lc = ld_b(NC);
  float* uk = sm;                // [C][lk]
  float* qe = uk + kChunk * lk;  // [C][lk]
  float* kd = qe + kChunk * lk;  // [C][ld]
  float* aq = kd + kChunk * ld;  // [C][la]
  float* uv = aq + kChunk * la;  // [C][lc]
  float* vp = uv + kChunk * lc;  // [C][lc]
  float* S = vp + kChunk * lc;   // [dk][lc]
  float* decay = S + dk * lc;    // [4]
  for (int e = threadIdx.x; e < dk * NC; e += kThreads)
    S[(e / NC) * lc + e % NC] = Sg[(e / NC) * dv + c_lo + e % NC];

  // The three cp.async groups of chunk j (empty past the last chunk): U_k and U_v's columns; q∘e^c and aq;
  // k∘e^{c_last - c} and the decay. 16-byte pieces: every scratch array starts at a multiple of 4 floats.
  auto rows16 = [&](float* dst, int ldst, const float* src, int lsrc, int rows, int cols) {
    for (int e = threadIdx.x; e < rows * (cols / 4); e += kThreads) {
      const int i = e / (cols / 4), c = 4 * (e % (cols / 4));
      cp_async16(dst + i * ldst + c, src + i * lsrc + c, true);
    }
  };
  auto load_u = [&](int64_t j) {
    if (j < nch) {
      const ChunkScratch sc = scratch_at(const_cast<float*>(scratch), first + j, h, d);
      rows16(uk, lk, sc.uk, dk, kChunk, dk);
      rows16(uv, lc, sc.uv + c_lo, dv, kChunk, NC);
    }
    cp_async_commit();
  };
  auto load_q = [&](int64_t j) {
    if (j < nch) {
      const ChunkScratch sc = scratch_at(const_cast<float*>(scratch), first + j, h, d);
      rows16(qe, lk, sc.qe, dk, kChunk, dk);
      rows16(aq, la, sc.aq, kChunk, kChunk, kChunk);
    }
    cp_async_commit();
  };
  auto load_k = [&](int64_t j) {
    if (j < nch) {
      const ChunkScratch sc = scratch_at(const_cast<float*>(scratch), first + j, h, d);
      rows16(kd, ld, sc.kd, dk, kChunk, dk);
      rows16(decay, 4, sc.cum, 4, 1, 4);
    }
    cp_async_commit();
  };
  // The products' operands: A(row, k) and B(k, column) of each.
  auto a_uk = [&](int r, int kx) { return uk[r * lk + kx]; };
  auto a_qe = [&](int r, int kx) { return qe[r * lk + kx]; };
  auto a_aq = [&](int r, int kx) { return aq[r * la + kx]; };
  auto a_kdt = [&](int r, int kx) { return kd[kx * ld + r]; };  // (k∘e^{c_last - c})ᵀ
  auto b_state = [&](int kx, int n) { return S[kx * lc + n]; };
  auto b_vp = [&](int kx, int n) { return vp[kx * lc + n]; };

  load_u(0);
  load_q(0);
  const int m0 = 16 * (warp / 2), n0 = (NC / 2) * (warp % 2);
  for (int64_t j = 0; j < nch; ++j) {
    int64_t c0 = 0;
    int L = 0;
    chunk_rows(sg, j, c0, L);
    cp_async_wait<1>();  // U of chunk j is in (q∘e^c, aq may still be in flight)
    __syncthreads();     // ... for every thread; the previous chunk's state update and its kd reads are done
    load_k(j);
    // v' = U_v - U_k S
    {
      float acc[NT][4] = {};
      warp_mma<NT>(acc, m0, n0, dk, a_uk, b_state);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = frag_row(m0, c), col = frag_col(n0, nt, c);
          vp[i * lc + col] = uv[i * lc + col] - acc[nt][c];
        }
    }
    cp_async_wait<1>();  // q∘e^c, aq of chunk j are in
    __syncthreads();     // v' written; U_k, U_v free
    load_u(j + 1);
    // o = (q∘e^c) S + aq v', the two products summed apart, then added, as the CPU (aq is zero above its
    // diagonal: the row block's first m0 + 16 keys suffice)
    {
      float inter[NT][4] = {}, intra[NT][4] = {};
      warp_mma<NT>(inter, m0, n0, dk, a_qe, b_state);
      warp_mma<NT>(intra, m0, n0, m0 + 16, a_aq, b_vp);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = frag_row(m0, c), col = frag_col(n0, nt, c);
          if (i < L)
            out[((sg.r0 + c0 + i) * d.hv + h) * d.dv + c_lo + col] = from_f<T>(inter[nt][c] + intra[nt][c]);
        }
    }
    cp_async_wait<1>();  // kd and the decay of chunk j are in
    __syncthreads();     // every read of the old state is done; q∘e^c, aq free
    load_q(j + 1);
    // S = S e^{c_last} + (k∘e^{c_last - c})ᵀ v'
    {
      const float el = decay[0];
      float* kept = kp.at(c0 + L - 1, h, d.dk * d.dv);
      for (int it = warp; it < 2 * (dk / 16); it += kWarps) {
        const int r0 = 16 * (it / 2), q0 = (NC / 2) * (it % 2);
        float upd[NT][4] = {};
        warp_mma<NT>(upd, r0, q0, kChunk, a_kdt, b_vp);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int r = frag_row(r0, c), col = frag_col(q0, nt, c);
            const float nv = S[r * lc + col] * el + upd[nt][c];  // the CPU's rounding points
            S[r * lc + col] = nv;
            if (kept) kept[r * d.dv + c_lo + col] = nv;
          }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  for (int e = threadIdx.x; e < dk * NC; e += kThreads)
    Sg[(e / NC) * dv + c_lo + e % NC] = S[(e / NC) * lc + e % NC];
}

template <class T, int NC>
void launch_scan(cudaStream_t s, const Dims& d, dim3 grid, const int32_t* segs, float* states, T* out,
                 float* keep, const float* scratch) {
  const size_t smem = static_cast<size_t>(scan_tc_floats(d.dk, NC)) * sizeof(float);
  static OncePerDevice attr;  // the limit is per device: the largest any dk <= kMaxDk asks for
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(scan_tc_kernel<T, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(scan_tc_floats(kMaxDk, NC) * sizeof(float))));
  });
  scan_tc_kernel<T, NC><<<grid, kThreads, smem, s>>>(d, segs, states, out, keep, scratch);
  TF_CUDA_LAUNCHED();
}

template <class T>
void launch_tc(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& g, const Tensor& beta, float* states, const int32_t* segs, int64_t n_seg,
               const Tensor& out, float* keep, float mul, float* scratch, int64_t chunk_bound, int nc) {
  static OncePerDevice attr;  // the limit is per device: the largest any dk, dv taken ask for
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(prep_tc_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(prep_tc_floats(kMaxDk, kMaxDv) * sizeof(float))));
  });
  const size_t prep_smem = static_cast<size_t>(prep_tc_floats(d.dk, d.dv)) * sizeof(float);
  prep_tc_kernel<T>
      <<<dim3(static_cast<unsigned>(d.hv), static_cast<unsigned>(chunk_bound)), kThreads, prep_smem, s>>>(
          d, ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const float>(g), ptr<const T>(beta), segs,
          n_seg, scratch, mul);
  TF_CUDA_LAUNCHED();
  const dim3 grid(static_cast<unsigned>(d.hv), static_cast<unsigned>(n_seg),
                  static_cast<unsigned>(d.dv / nc));
  if (nc == 16)
    launch_scan<T, 16>(s, d, grid, segs, states, ptr<T>(out), keep, scratch);
  else if (nc == 32)
    launch_scan<T, 32>(s, d, grid, segs, states, ptr<T>(out), keep, scratch);
  else
    launch_scan<T, 64>(s, d, grid, segs, states, ptr<T>(out), keep, scratch);
}

}  // namespace

bool launch_chunked_rule_tc(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& g, const Tensor& beta, float* states, const int32_t* segs,
                            int64_t n_seg, const Tensor& out, float* keep, float mul, float* scratch,
                            int64_t chunk_bound) {
  if (d.dk % 16 || d.dv % 16 || d.dk > kMaxDk || d.dv > kMaxDv) return false;
  const int sms = sm_count();
  // Value columns per scan block: the fewest (most blocks) that still fit the SMs in one wave, else the
  // most that divide dv (the chunk's scratch is read once per block). The bits do not depend on it.
  int nc = 16;
  for (int c : {32, 64}) {
    if (d.dv % c || d.hv * n_seg * (d.dv / nc) <= sms) break;
    nc = c;
  }
  TF_DISPATCH_ACT(q.dtype, T, {
    launch_tc<T>(s, d, q, k, v, g, beta, states, segs, n_seg, out, keep, mul, scratch, chunk_bound, nc);
  });
  return true;
}

}  // namespace tf::cuda::gdr
