// The chunked gated delta rule (prefill, multi-token verification) in two launches, the CPU reference's
// arithmetic statement by statement (backend/cpu/gated_delta_rule.cpp), so the outputs and the f32 states
// are bit-identical to it:
//   1. prep, one block per (value head, chunk of 64 positions) of every segment: everything a chunk
//      computes without the state (normalised q/k, the decay cumsum, kβkᵀ∘P, the forward substitution
//      U_v, U_k, (q kᵀ)∘P), written to a per-chunk scratch together with q∘exp(c) and k∘exp(c_last - c),
//      the two products the state terms multiply;
//   2. scan, one block per (value head, segment, 16 value columns): the state's columns are independent
//      (v' = U_v - U_k S, o = (q∘e^c) S + A v', S = S e^{c_last} + (k∘e^{c_last-c})ᵀ v' all act column by
//      column), so each block carries its 16 columns of S through the segment's chunks in order.
// Every element is one thread's sum in the reference's order; only which thread computes it changed. Chunks
// are counted from the segment's first position pos0 (the first ends at the next multiple of 64).
// launch_chunked_rule runs gated_delta_rule_chunks_tc.cu's tensor-core form of the same two launches for the
// head dims it takes (Qwen3.5's 128 / 128, the demo's 64 / 64): these kernels are the CPU-exact form for
// the others, and for every shape with test_hooks::set_cuda_delta_rule_variant(2).
#include <atomic>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_delta_rule.cuh"
#include "backend/cuda/once_per_device.h"

namespace tf::cuda {
extern std::atomic<int> g_delta_rule_variant;  // gated_delta_rule.cu
}  // namespace tf::cuda

namespace tf::cuda::gdr {
namespace {

constexpr int kCols = 16;  // value columns per scan block
// The prep's dynamic shared memory limit: 227 KiB less its static arrays (P, A and six [C] vectors).
constexpr int64_t kPrepSmemMax = 227 * 1024 - (2 * kChunk * kChunk + 6 * kChunk) * 4;

// Dynamic shared memory floats of the prep: normalised q and k [C, dk + 1] (rows padded a float so a
// warp's threads reading 32 rows at one column hit 32 banks), U [C, dv + dk] (thread e's column e).
__host__ __device__ int64_t prep_smem_floats(int64_t dk, int64_t dv) {
  return 2 * kChunk * (dk + 1) + kChunk * (dv + dk);
}

// grid (hv, a bound on the call's chunks); blocks past the last chunk return.
template <class T>
__global__ void prep_kernel(Dims d, const T* q, const T* k, const T* v, const float* g, const T* beta,
                            const int32_t* segs, int64_t n_seg, float* scratch, float mul) {
  extern __shared__ float sm[];
  __shared__ float cum[kChunk], B[kChunk], ec[kChunk], el[kChunk], inv_q[kChunk], inv_k[kChunk];
  __shared__ float P[kChunk][kChunk], A[kChunk][kChunk];
  const int64_t h = blockIdx.x, dk = d.dk, dv = d.dv, ld = dk + 1, kh = h / d.ratio;
  int64_t fc = blockIdx.y;
  SegRow sg;
  if (!locate_chunk(segs, n_seg, d.n, fc, sg)) return;
  int64_t c0 = 0;
  int L = 0;
  chunk_rows(sg, fc, c0, L);
  const ChunkScratch sc = scratch_at(scratch, blockIdx.y, h, d);
  const int64_t r0 = sg.r0 + c0;  // the chunk's first row in the call
  float* qs = sm;                 // [C, ld]
  float* ks = qs + kChunk * ld;   // [C, ld]
  float* U = ks + kChunk * ld;    // [C, dv + dk]: U_v | U_k
  const int64_t wu = dv + dk;
  // load_qk's arithmetic: x * 1/sqrt(Σx² + 1e-6) (dot_f32's lanes), q then times mul.
  for (int r = threadIdx.x; r < 2 * L; r += blockDim.x) {
    const int i = r % L;
    const T* x = (r < L ? q : k) + ((r0 + i) * d.hk + kh) * dk;
    (r < L ? inv_q : inv_k)[i] = 1.0f / sqrtf(dot8(x, x, dk) + 1e-6f);
  }
  if (threadIdx.x == 0) {
    double acc = 0.0;  // torch's CPU cumsum: double accumulator, each prefix rounded to f32
    for (int i = 0; i < L; ++i) sc.cum[i] = cum[i] = static_cast<float>(acc += g[(r0 + i) * d.hv + h]);
  }
  for (int i = threadIdx.x; i < L; i += blockDim.x) B[i] = to_f(beta[(r0 + i) * d.hv + h]);
  __syncthreads();
  const int dki = static_cast<int>(dk), wui = static_cast<int>(wu);  // 32-bit index arithmetic below
  for (int e = threadIdx.x; e < L * dki; e += blockDim.x) {
    const int i = e / dki, c = e - i * dki;
    const int64_t src = ((r0 + i) * d.hk + kh) * dk + c;
    qs[i * ld + c] = (to_f(q[src]) * inv_q[i]) * mul;
    ks[i * ld + c] = to_f(k[src]) * inv_k[i];
  }
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    ec[i] = exp_f(cum[i]);
    el[i] = exp_f(cum[L - 1] - cum[i]);
  }
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int i = e / L, j = e % L;
    if (j <= i) P[i][j] = exp_f(cum[i] - cum[j]);
  }
  __syncthreads();
  // A[i][j] = (kβ_i · k_j) P[i][j], j < i
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int i = e / L, j = e % L;
    if (j >= i) continue;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < dk; ++c) acc[c & 7] += (ks[i * ld + c] * B[i]) * ks[j * ld + c];
    A[i][j] = combine8(acc) * P[i][j];
  }
  __syncthreads();
  // Forward substitution: [U_v | U_k]_i = [vβ | kβ∘exp(c)]_i - Σ_{j<i} A[i][j] [U_v | U_k]_j. A thread
  // owns its columns through every row, so the rows need no barrier between them.
  for (int64_t e = threadIdx.x; e < wu; e += blockDim.x)
    for (int i = 0; i < L; ++i) {
      float u =
          e < dv ? to_f(v[((r0 + i) * d.hv + h) * dv + e]) * B[i] : (ks[i * ld + e - dv] * B[i]) * ec[i];
      for (int j = 0; j < i; ++j) u -= A[i][j] * U[j * wu + e];
      U[i * wu + e] = u;
    }
  // aq[i][j] = (q_i · k_j) P[i][j] for j <= i (dot_f32's lanes).
  for (int e = threadIdx.x; e < L * L; e += blockDim.x) {
    const int i = e / L, j = e % L;
    if (j > i) continue;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < dk; ++c) acc[c & 7] += qs[i * ld + c] * ks[j * ld + c];
    sc.aq[i * kChunk + j] = combine8(acc) * P[i][j];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < L * wui; e += blockDim.x) {
    const int i = e / wui, c = e - i * wui;
    if (c < dv)
      sc.uv[i * dv + c] = U[e];
    else
      sc.uk[i * dk + c - dv] = U[e];
  }
  for (int e = threadIdx.x; e < L * dki; e += blockDim.x) {
    const int i = e / dki, c = e - i * dki;
    sc.qe[e] = qs[i * ld + c] * ec[i];  // q_i exp(c_i)
    sc.kd[e] = ks[i * ld + c] * el[i];  // k_i exp(c_last - c_i)
  }
}

// Dynamic shared memory floats of the scan: S [dk, kCols], v' [C, kCols], uk, qe [C, dk + 1] (padded as the
// prep's q/k), kd [C, dk], aq [C, C], cum [C].
__host__ __device__ int64_t scan_smem_floats(int64_t dk) {
  return dk * kCols + kChunk * kCols + 2 * kChunk * (dk + 1) + kChunk * dk + kChunk * kChunk + kChunk;
}

constexpr int kRowGroups = 256 / kCols;              // scan threads per column (the block is 256 threads)
constexpr int kRowsPerThread = kChunk / kRowGroups;  // chunk rows per thread in v' and o
constexpr int kMaxStateRows = 256 / kRowGroups;      // state rows per thread in the update (dk <= 256)

// grid (hv, n_seg, ceil(dv / kCols)): block (h, s, z) carries value columns [16 z, 16 z + 16) of head h's
// state through segment s's chunks. states [.., hv, dk, dv] (slot stride hv·dk·dv); keep likewise. Thread t
// owns column t % 16 and the rows t / 16 + 16 m: its several sums run side by side (independent chains), each
// still in the reference's order.
template <class T>
__global__ void __launch_bounds__(256)
    scan_kernel(Dims d, const int32_t* segs, float* states, T* out, float* keep, const float* scratch) {
  extern __shared__ float sm[];
  const int64_t h = blockIdx.x, s = blockIdx.y, dk = d.dk, dv = d.dv, ld = dk + 1;
  const int64_t c_lo = static_cast<int64_t>(blockIdx.z) * kCols;
  const int nc = static_cast<int>(dv - c_lo < kCols ? dv - c_lo : kCols);
  const int cc = threadIdx.x % kCols, rg = threadIdx.x / kCols;
  const SegRow sg = read_seg_row(segs, s, d.n);
  if (sg.n <= 0) return;
  const int64_t first = first_chunk(segs, s, d.n);  // the segment's first chunk in the call's chunk order
  const int64_t hs = d.hv * dk * dv;
  float* S = states + sg.slot * hs + h * dk * dv;
  const KeepPlan kp = keep_plan(sg, keep, hs);
  float* Ss = sm;                   // [dk, kCols]
  float* vp = Ss + dk * kCols;      // [C, kCols]
  float* uk = vp + kChunk * kCols;  // [C, ld]
  float* qe = uk + kChunk * ld;     // [C, ld]
  float* kd = qe + kChunk * ld;     // [C, dk]
  float* aq = kd + kChunk * dk;     // [C, C]
  float* cum = aq + kChunk * kChunk;
  for (int64_t e = threadIdx.x; e < dk * nc; e += blockDim.x)
    Ss[(e / nc) * kCols + e % nc] = S[(e / nc) * dv + c_lo + e % nc];
  const bool col = cc < nc;
  const int64_t nch = n_chunks(sg);
  for (int64_t j = 0; j < nch; ++j) {
    int64_t c0 = 0;
    int L = 0;
    chunk_rows(sg, j, c0, L);
    const ChunkScratch sc = scratch_at(const_cast<float*>(scratch), first + j, h, d);
    // The chunk's prep outputs into shared memory (pure copies; 32-bit indices, 16-byte loads when dk % 4 ==
    // 0: every scratch array starts at a multiple of 4 floats, and so do kd and aq in shared memory).
    const int dki = static_cast<int>(dk), ldi = static_cast<int>(ld);
    if (dki % 4 == 0) {
      const auto* uk4 = reinterpret_cast<const float4*>(sc.uk);
      const auto* qe4 = reinterpret_cast<const float4*>(sc.qe);
#pragma unroll 4
      for (int e4 = threadIdx.x; e4 < L * dki / 4; e4 += blockDim.x) {
        const int e = 4 * e4, i = e / dki, r = e - i * dki;
        const float4 a = uk4[e4], b = qe4[e4];
        float* ud = uk + i * ldi + r;
        float* qd = qe + i * ldi + r;
        ud[0] = a.x, ud[1] = a.y, ud[2] = a.z, ud[3] = a.w;
        qd[0] = b.x, qd[1] = b.y, qd[2] = b.z, qd[3] = b.w;
        reinterpret_cast<float4*>(kd)[e4] = reinterpret_cast<const float4*>(sc.kd)[e4];
      }
    } else {
      for (int e = threadIdx.x; e < L * dki; e += blockDim.x) {
        const int i = e / dki, r = e - i * dki;
        uk[i * ldi + r] = sc.uk[e];
        qe[i * ldi + r] = sc.qe[e];
        kd[e] = sc.kd[e];
      }
    }
#pragma unroll 4
    for (int e4 = threadIdx.x; e4 < L * (kChunk / 4); e4 += blockDim.x)
      reinterpret_cast<float4*>(aq)[e4] = reinterpret_cast<const float4*>(sc.aq)[e4];
    for (int e = threadIdx.x; e < L; e += blockDim.x) cum[e] = sc.cum[e];
    __syncthreads();
    // v' = U_v - U_k S
    {
      float acc[kRowsPerThread] = {};
      for (int64_t r = 0; r < dk; ++r) {
        const float sv = Ss[r * kCols + cc];
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) acc[m] += uk[(rg + kRowGroups * m) * ld + r] * sv;
      }
#pragma unroll
      for (int m = 0; m < kRowsPerThread; ++m) {
        const int i = rg + kRowGroups * m;
        if (col && i < L) vp[i * kCols + cc] = sc.uv[i * dv + c_lo + cc] - acc[m];
      }
    }
    __syncthreads();
    // o_i = (q_i exp(c_i)) S + Σ_{j<=i} A[i][j] v'_j, the two products summed apart, then added.
    {
      float o[kRowsPerThread] = {}, o2[kRowsPerThread] = {};
      for (int64_t r = 0; r < dk; ++r) {
        const float sv = Ss[r * kCols + cc];
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) o[m] += qe[(rg + kRowGroups * m) * ld + r] * sv;
      }
      const int top =
          rg + kRowGroups * (kRowsPerThread - 1) < L - 1 ? rg + kRowGroups * (kRowsPerThread - 1) : L - 1;
      for (int t = 0; t <= top; ++t) {
        const float vt = vp[t * kCols + cc];
#pragma unroll
        for (int m = 0; m < kRowsPerThread; ++m) {
          const int i = rg + kRowGroups * m;
          if (t <= i) o2[m] += aq[i * kChunk + t] * vt;
        }
      }
#pragma unroll
      for (int m = 0; m < kRowsPerThread; ++m) {
        const int i = rg + kRowGroups * m;
        if (col && i < L) out[((sg.r0 + c0 + i) * d.hv + h) * dv + c_lo + cc] = from_f<T>(o[m] + o2[m]);
      }
    }
    __syncthreads();  // every read of the old state is done
    // S = S exp(c_last) + Σ_i (k_i exp(c_last - c_i)) ⊗ v'_i
    {
      const float el = exp_f(cum[L - 1]);
      float* kept = kp.at(c0 + L - 1, h, dk * dv);
      float upd[kMaxStateRows] = {};
      for (int i = 0; i < L; ++i) {
        const float vi = vp[i * kCols + cc];
#pragma unroll
        for (int m = 0; m < kMaxStateRows; ++m) {
          const int64_t r = rg + kRowGroups * m;
          if (r < dk) upd[m] += kd[i * dk + r] * vi;
        }
      }
#pragma unroll
      for (int m = 0; m < kMaxStateRows; ++m) {
        const int64_t r = rg + kRowGroups * m;
        if (col && r < dk) {
          const float nv = Ss[r * kCols + cc] * el + upd[m];
          Ss[r * kCols + cc] = nv;
          if (kept) kept[r * dv + c_lo + cc] = nv;
        }
      }
    }
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < dk * nc; e += blockDim.x)
    S[(e / nc) * dv + c_lo + e % nc] = Ss[(e / nc) * kCols + e % nc];
}

}  // namespace

void launch_chunked_rule(cudaStream_t s, const Dims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& g, const Tensor& beta, float* states, const int32_t* segs,
                         int64_t n_seg, const Tensor& out, float* keep, float mul) {
  if (d.n == 0 || d.hv == 0 || n_seg == 0) return;
  const int64_t smem = scan_smem_floats(d.dk) * static_cast<int64_t>(sizeof(float));
  const int64_t prep_smem = prep_smem_floats(d.dk, d.dv) * static_cast<int64_t>(sizeof(float));
  TF_CHECK(smem <= 227 * 1024 && prep_smem <= kPrepSmemMax && d.dk <= kRowGroups * kMaxStateRows &&
           "gated delta rule: head dims too large for the chunked kernels");
  // Each segment has at most n_s / 64 + 2 chunks (a partial one at each end).
  const int64_t chunk_bound = d.n / kChunk + 2 * n_seg;
  TF_CHECK(chunk_bound <= 65535 && n_seg <= 65535);
  float* scratch = nullptr;
  TF_CUDA_CHECK(cudaMallocAsync(
      &scratch, static_cast<size_t>(scratch_per_chunk(d.dk, d.dv) * d.hv * chunk_bound) * sizeof(float), s));
  if (g_delta_rule_variant.load(std::memory_order_relaxed) != 2 &&
      launch_chunked_rule_tc(s, d, q, k, v, g, beta, states, segs, n_seg, out, keep, mul, scratch,
                             chunk_bound)) {
    TF_CUDA_CHECK(cudaFreeAsync(scratch, s));
    return;
  }
  TF_DISPATCH_ACT(q.dtype, T, {
    static OncePerDevice attr;  // the limits are per device; the largest the kernels can ask for
    attr.run([&](int) {
      TF_CUDA_CHECK(cudaFuncSetAttribute(prep_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kPrepSmemMax)));
      TF_CUDA_CHECK(
          cudaFuncSetAttribute(scan_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    });
    prep_kernel<T><<<dim3(static_cast<unsigned>(d.hv), static_cast<unsigned>(chunk_bound)), kThreads,
                     static_cast<size_t>(prep_smem), s>>>(d, ptr<const T>(q), ptr<const T>(k),
                                                          ptr<const T>(v), ptr<const float>(g),
                                                          ptr<const T>(beta), segs, n_seg, scratch, mul);
    TF_CUDA_LAUNCHED();
    const dim3 grid(static_cast<unsigned>(d.hv), static_cast<unsigned>(n_seg),
                    static_cast<unsigned>((d.dv + kCols - 1) / kCols));
    scan_kernel<T>
        <<<grid, kThreads, static_cast<size_t>(smem), s>>>(d, segs, states, ptr<T>(out), keep, scratch);
    TF_CUDA_LAUNCHED();
  });
  TF_CUDA_CHECK(cudaFreeAsync(scratch, s));
}

}  // namespace tf::cuda::gdr
