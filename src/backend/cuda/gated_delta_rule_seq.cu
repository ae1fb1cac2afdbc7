// Gated delta rule, the per-token form (selected by test_hooks::set_cuda_delta_rule_variant(1); the
// default is gated_delta_rule.cu's, the CPU's chunked arithmetic bit for bit). Measured on the H200 it cuts
// the Qwen3.5-0.8B page's time to first token from 1.5 s to 0.23 s, but its rounding differs from
// Transformers' chunked form enough that the tiny bf16 golden `two_images` leaves the greedy tie rule
// (a difference at a 0.125 margin; lm_head cos 2.6x the oracle's own CUDA-vs-CPU noise): it stays off
// until a chunked tensor-core form (issue 17) keeps Transformers' rounding structure. What follows is
// the kernel as written: chunked (prefill) and recurrent (decode) entry points alike: one per-token
// recurrent kernel. The chunked form of ops.h is an algebraic rewrite of the same rule, so both entry
// points run the rule token by token, exactly as ops.h states it:
//   S = exp(g_t) S;  delta = (v_t - Sᵀ k_t) β_t;  S += k_t ⊗ delta;  o_t = Sᵀ q_t.
// The CUDA backend is held to the CPU op by a tolerance (cuda_contract_qwen_test.cpp says which and
// why); within CUDA every token runs the same arithmetic wherever the call boundaries fall and whichever
// entry point was called, so one call over n tokens, any split of them and the recurrent entry give the
// same bits (outputs and state).
//
// Two launches per call, with an f32 scratch buffer between them:
//  1. prep_kernel, one warp per (token, key head): q and k l2-normalised, x * (1 / sqrtf(Σx² + 1e-6))
//     with the sums in a fixed order (lane i sums elements i, i + 32, ... with fmaf, then a fixed xor
//     tree), q then scaled by fl32(1/sqrt(dk)) (the chunked form's scaling, for both entry points);
//     kq = kn · qn; per value head {exp(g), β, kq} and v, all in f32.
//  2. recurrence: a block owns kCols columns of one value head's state S[dk, dv]; column c's dk values
//     sit in the registers of kLanes lanes (lane j holds rows 4 (8r + j) + e, r < dk/32, e < 4). Per
//     token, with d = exp(g):
//        sk = Σ_i S[i][c] k_i,  sq = Σ_i S[i][c] q_i     (4 partial sums per lane, then a 3-step xor tree)
//        delta = (v_c - d·sk) β;  o_c = fmaf(delta, kq, d·sq);  S[i][c] = fmaf(k_i, delta, d·S[i][c])
//     which is the rule above with Sᵀ q of the updated state expanded as d·(Sᵀq) + delta (k·q).
//     Tokens are staged in shared memory in batches of kTb; the next batch is copied (cp.async) while
//     the current one runs, and each token's q/k are read into registers one token ahead. The state is
//     read from and written to global memory once per call, through shared memory (coalesced).
// Shapes outside the fast path (dk not a multiple of 32 or above 256, dv not a multiple of 16) run
// generic_kernel: one thread per state column, the column in global memory, the same per-token formulas
// (slower; equally invariant: a shape always takes the same kernel).
#include <algorithm>
#include <cmath>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

using Dims = opcheck::DeltaRuleDims;

constexpr int kLanes = 8;                 // lanes per state column (dk split across them)
constexpr int kCols = 16;                 // state columns per block
constexpr int kThreads = kLanes * kCols;  // 128: warp w holds columns 4w .. 4w + 3
constexpr int kColPad = kCols + 1;        // row stride of the state tile in shared memory (no bank conflicts)
constexpr int kMaxG = 8;                  // dk / 32 <= 8: dk <= 256

// Scratch, f32, each part 256-byte aligned:
//   qk[n, hk, 2, dk]  normalised and scaled q, then normalised k
//   vf[n, hv, dv]     v in f32
//   rec[n, hv]        {exp(g), β, kq, 0}
struct Scratch {
  float* qk;
  float* vf;
  float4* rec;
};

inline int64_t pad64(int64_t x) { return (x + 63) / 64 * 64; }

// Σ over the 32 lanes in a fixed xor tree. Every lane ends with the same bits: each step adds two values
// that are pairwise equal across the lanes it joins, and IEEE addition commutes.
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// q, k[n, hk, dk], v[n, hv, dv] act, g[n, hv] f32, beta[n, hv] act. One warp per (t, kh) = w.
template <class T>
__global__ void prep_kernel(Dims d, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                            const float* __restrict__ g, const T* __restrict__ beta, float scale,
                            Scratch sc) {
  const int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= d.n * d.hk) return;  // the whole warp leaves together
  const int64_t t = w / d.hk, kh = w % d.hk;
  const T* qr = q + w * d.dk;  // q[t, kh, :]
  const T* kr = k + w * d.dk;
  float ssq = 0.0f, ssk = 0.0f;
  for (int64_t i = lane; i < d.dk; i += 32) {
    const float a = to_f(qr[i]), b = to_f(kr[i]);
    ssq = fmaf(a, a, ssq);
    ssk = fmaf(b, b, ssk);
  }
  const float iq = 1.0f / sqrtf(warp_sum(ssq) + 1e-6f), ik = 1.0f / sqrtf(warp_sum(ssk) + 1e-6f);
  float* qo = sc.qk + w * 2 * d.dk;
  float* ko = qo + d.dk;
  float kq = 0.0f;
  for (int64_t i = lane; i < d.dk; i += 32) {
    const float qn = (to_f(qr[i]) * iq) * scale, kn = to_f(kr[i]) * ik;
    qo[i] = qn;
    ko[i] = kn;
    kq = fmaf(kn, qn, kq);
  }
  kq = warp_sum(kq);
  // Value heads kh * ratio .. (kh + 1) * ratio - 1 read this key head (h / ratio == kh).
  for (int64_t h = kh * d.ratio; h < (kh + 1) * d.ratio; ++h) {
    const int64_t th = t * d.hv + h;
    if (lane == 0) sc.rec[th] = make_float4(exp_f(g[th]), to_f(beta[th]), kq, 0.0f);
    for (int64_t i = lane; i < d.dv; i += 32) sc.vf[th * d.dv + i] = to_f(v[th * d.dv + i]);
  }
}

// Tokens per staged batch: 2 stages of kTb tokens keep shared memory near 80 KB for every dk.
template <int G>
constexpr int kTb = G <= 4 ? 32 : 16;
template <int G>
constexpr int kStageFloats = kTb<G>*(2 * 32 * G + kCols + 4);  // qk[kTb][2 dk] | vf[kTb][kCols] | rec[kTb]
template <int G>                                               // 2 stages | the state tile [dk][kColPad]
constexpr size_t kSmemBytes = (2 * kStageFloats<G> + 32 * G * kColPad) * sizeof(float);

// One token of the recurrence for the lane's column: s[4G] its rows of S, kc/qc this token's k and q
// (the lane's rows), kn/qn receive the next token's when `next` (the loads overlap the sums).
template <int G>
__device__ __forceinline__ float token_step(float (&s)[4 * G], const float4 (&kc)[G], const float4 (&qc)[G],
                                            float4 (&kn)[G], float4 (&qn)[G], bool next,
                                            const float4* next_q4, int j, float v, float4 rc) {
  float ak[4] = {0.0f, 0.0f, 0.0f, 0.0f}, aq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < G; ++r) {
    ak[0] = fmaf(s[4 * r + 0], kc[r].x, ak[0]);
    ak[1] = fmaf(s[4 * r + 1], kc[r].y, ak[1]);
    ak[2] = fmaf(s[4 * r + 2], kc[r].z, ak[2]);
    ak[3] = fmaf(s[4 * r + 3], kc[r].w, ak[3]);
    aq[0] = fmaf(s[4 * r + 0], qc[r].x, aq[0]);
    aq[1] = fmaf(s[4 * r + 1], qc[r].y, aq[1]);
    aq[2] = fmaf(s[4 * r + 2], qc[r].z, aq[2]);
    aq[3] = fmaf(s[4 * r + 3], qc[r].w, aq[3]);
  }
  if (next) {  // uniform across the block
#pragma unroll
    for (int r = 0; r < G; ++r) {
      qn[r] = next_q4[r * kLanes + j];
      kn[r] = next_q4[8 * G + r * kLanes + j];  // k follows q: dk / 4 = 8G float4s
    }
  }
  float sk = (ak[0] + ak[1]) + (ak[2] + ak[3]), sq = (aq[0] + aq[1]) + (aq[2] + aq[3]);
#pragma unroll
  for (int m = kLanes / 2; m >= 1; m >>= 1) {  // the column's 8 lanes are consecutive: xor 4, 2, 1
    sk += __shfl_xor_sync(0xffffffffu, sk, m);
    sq += __shfl_xor_sync(0xffffffffu, sq, m);
  }
  const float decay = rc.x, delta = (v - decay * sk) * rc.y;
#pragma unroll
  for (int r = 0; r < G; ++r) {
    s[4 * r + 0] = fmaf(kc[r].x, delta, decay * s[4 * r + 0]);
    s[4 * r + 1] = fmaf(kc[r].y, delta, decay * s[4 * r + 1]);
    s[4 * r + 2] = fmaf(kc[r].z, delta, decay * s[4 * r + 2]);
    s[4 * r + 3] = fmaf(kc[r].w, delta, decay * s[4 * r + 3]);
  }
  return fmaf(delta, rc.z, decay * sq);
}

// state[hv, dk, dv] f32 in/out, out[n, hv, dv] act. grid (dv / kCols, hv), kThreads threads,
// kSmemBytes<G> of dynamic shared memory. dk = 32 G.
template <class T, int G>
__global__ void __launch_bounds__(kThreads)
    recurrent_kernel(Dims d, Scratch sc, float* __restrict__ state, T* __restrict__ out) {
  constexpr int dk = 32 * G, tb = kTb<G>, sf = kStageFloats<G>;
  extern __shared__ __align__(16) float smem[];
  float* tile = smem + 2 * sf;  // [dk][kColPad]
  const int tid = static_cast<int>(threadIdx.x), j = tid % kLanes, cl = tid / kLanes;
  const int64_t h = blockIdx.y, kh = h / d.ratio, c0 = static_cast<int64_t>(blockIdx.x) * kCols;
  float* S = state + h * dk * d.dv;  // [dk, dv]

  // Copies tokens [t0, t0 + cnt) into stage `st`; one commit group per call.
  auto stage_in = [&](int st, int64_t t0, int cnt) {
    float* qk = smem + st * sf;
    float* vf = qk + tb * 2 * dk;
    float* rec = vf + tb * kCols;
    for (int e = tid; e < cnt * (dk / 2); e += kThreads) {  // 2 dk floats = dk / 2 chunks per token
      const int i = e / (dk / 2), ch = e % (dk / 2);
      mma::cp_async16(qk + i * 2 * dk + ch * 4, sc.qk + ((t0 + i) * d.hk + kh) * 2 * dk + ch * 4, true);
    }
    for (int e = tid; e < cnt * (kCols / 4); e += kThreads) {
      const int i = e / (kCols / 4), ch = e % (kCols / 4);
      mma::cp_async16(vf + i * kCols + ch * 4, sc.vf + ((t0 + i) * d.hv + h) * d.dv + c0 + ch * 4, true);
    }
    for (int i = tid; i < cnt; i += kThreads)
      mma::cp_async16(rec + i * 4, sc.rec + (t0 + i) * d.hv + h, true);
    mma::cp_async_commit();
  };

  const int64_t n_batches = (d.n + tb - 1) / tb;
  stage_in(0, 0, static_cast<int>(d.n < tb ? d.n : tb));
  for (int e = tid; e < dk * kCols; e += kThreads)
    tile[(e / kCols) * kColPad + e % kCols] = S[(e / kCols) * d.dv + c0 + e % kCols];
  __syncthreads();
  float s[4 * G];
#pragma unroll
  for (int r = 0; r < G; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[4 * r + e] = tile[(4 * (r * kLanes + j) + e) * kColPad + cl];

  for (int64_t b = 0; b < n_batches; ++b) {
    const int64_t t0 = b * tb;
    const int cnt = static_cast<int>(d.n - t0 < tb ? d.n - t0 : tb);
    if (b + 1 < n_batches)
      stage_in(static_cast<int>((b + 1) & 1), t0 + tb,
               static_cast<int>(d.n - t0 - tb < tb ? d.n - t0 - tb : tb));
    else
      mma::cp_async_commit();  // an empty group keeps "all but the newest group" meaning this batch
    mma::cp_async_wait<1>();
    __syncthreads();
    const float* qk = smem + (b & 1) * sf;
    const float* vf = qk + tb * 2 * dk;
    const float4* rec = reinterpret_cast<const float4*>(vf + tb * kCols);
    auto q4 = [&](int i) { return reinterpret_cast<const float4*>(qk + i * 2 * dk); };
    T* o = out + (t0 * d.hv + h) * d.dv + c0 + cl;  // token t0's element of this column
    const int64_t o_step = d.hv * d.dv;
    float4 ka[G], qa[G], kb[G], qb[G];
#pragma unroll
    for (int r = 0; r < G; ++r) {
      qa[r] = q4(0)[r * kLanes + j];
      ka[r] = q4(0)[8 * G + r * kLanes + j];
    }
    // Two tokens per trip, the register sets a and b alternating (no copies between them).
    int i = 0;
    for (; i + 1 < cnt; i += 2) {
      float y = token_step<G>(s, ka, qa, kb, qb, true, q4(i + 1), j, vf[i * kCols + cl], rec[i]);
      if (j == 0) o[i * o_step] = from_f<T>(y);
      y = token_step<G>(s, kb, qb, ka, qa, i + 2 < cnt, q4(i + 2), j, vf[(i + 1) * kCols + cl], rec[i + 1]);
      if (j == 0) o[(i + 1) * o_step] = from_f<T>(y);
    }
    if (i < cnt) {
      const float y = token_step<G>(s, ka, qa, kb, qb, false, q4(i), j, vf[i * kCols + cl], rec[i]);
      if (j == 0) o[i * o_step] = from_f<T>(y);
    }
    __syncthreads();  // this stage is refilled by the next trip's stage_in
  }

#pragma unroll
  for (int r = 0; r < G; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile[(4 * (r * kLanes + j) + e) * kColPad + cl] = s[4 * r + e];
  __syncthreads();
  for (int e = tid; e < dk * kCols; e += kThreads)
    S[(e / kCols) * d.dv + c0 + e % kCols] = tile[(e / kCols) * kColPad + e % kCols];
}

// Any dk, dv: one thread per column c of head h, S[:, c] in global memory. grid (ceil(dv / 128), hv).
template <class T>
__global__ void generic_kernel(Dims d, Scratch sc, float* __restrict__ state, T* __restrict__ out) {
  const int64_t h = blockIdx.y, kh = h / d.ratio,
                c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= d.dv) return;
  float* S = state + h * d.dk * d.dv + c;  // S[i][c] at S[i * dv]
  for (int64_t t = 0; t < d.n; ++t) {
    const float* qn = sc.qk + (t * d.hk + kh) * 2 * d.dk;
    const float* kn = qn + d.dk;
    const float4 rc = sc.rec[t * d.hv + h];
    float sk = 0.0f, sq = 0.0f;
    for (int64_t i = 0; i < d.dk; ++i) {
      const float x = S[i * d.dv];
      sk = fmaf(x, kn[i], sk);
      sq = fmaf(x, qn[i], sq);
    }
    const float decay = rc.x, delta = (sc.vf[(t * d.hv + h) * d.dv + c] - decay * sk) * rc.y;
    for (int64_t i = 0; i < d.dk; ++i) S[i * d.dv] = fmaf(kn[i], delta, decay * S[i * d.dv]);
    out[(t * d.hv + h) * d.dv + c] = from_f<T>(fmaf(delta, rc.z, decay * sq));
  }
}

template <class T, int G>
void launch_fast(cudaStream_t s, const Dims& d, const Scratch& sc, float* state, T* out) {
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(recurrent_kernel<T, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSmemBytes<G>)));
  });
  const dim3 grid(static_cast<unsigned>(d.dv / kCols), static_cast<unsigned>(d.hv));
  recurrent_kernel<T, G><<<grid, kThreads, kSmemBytes<G>, s>>>(d, sc, state, out);
  TF_CUDA_LAUNCHED();
}

template <class T>
void launch_recurrence(cudaStream_t s, const Dims& d, const Scratch& sc, float* state, T* out) {
  const bool fast = d.dk % 32 == 0 && d.dk >= 32 && d.dk <= 32 * kMaxG && d.dv % kCols == 0;
  switch (fast ? d.dk / 32 : 0) {
    case 1:
      return launch_fast<T, 1>(s, d, sc, state, out);
    case 2:
      return launch_fast<T, 2>(s, d, sc, state, out);
    case 3:
      return launch_fast<T, 3>(s, d, sc, state, out);
    case 4:
      return launch_fast<T, 4>(s, d, sc, state, out);
    case 5:
      return launch_fast<T, 5>(s, d, sc, state, out);
    case 6:
      return launch_fast<T, 6>(s, d, sc, state, out);
    case 7:
      return launch_fast<T, 7>(s, d, sc, state, out);
    case 8:
      return launch_fast<T, 8>(s, d, sc, state, out);
    default:
      break;
  }
  const dim3 grid(blocks_for(d.dv, 128), static_cast<unsigned>(d.hv));
  generic_kernel<T><<<grid, 128, 0, s>>>(d, sc, state, out);
  TF_CUDA_LAUNCHED();
}

}  // namespace

void launch_gated_delta_rule_seq(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                                 bool /*chunked: the same recurrence (see the top of this file)*/) {
  const Dims d = opcheck::delta_rule(q, k, v, g, beta, state, out);
  if (d.n == 0 || d.hv == 0 || d.dv == 0) return;
  TF_CHECK(d.hv <= 65535);
  // The chunked form's scaling, query * (1 / dk**0.5) (Python double, then the f32 tensor op).
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  const int64_t n_qk = pad64(d.n * d.hk * 2 * d.dk), n_vf = pad64(d.n * d.hv * d.dv), n_rec = 4 * d.n * d.hv;
  float* buf = nullptr;
  TF_CUDA_CHECK(cudaMallocAsync(&buf, static_cast<size_t>(n_qk + n_vf + n_rec) * sizeof(float), s));
  const Scratch sc{buf, buf + n_qk, reinterpret_cast<float4*>(buf + n_qk + n_vf)};
  TF_DISPATCH_ACT(q.dtype, T, {
    prep_kernel<T><<<blocks_for(d.n * d.hk, 4), 128, 0, s>>>(d, ptr<const T>(q), ptr<const T>(k),
                                                             ptr<const T>(v), ptr<const float>(g),
                                                             ptr<const T>(beta), scale, sc);
    TF_CUDA_LAUNCHED();
    launch_recurrence<T>(s, d, sc, ptr<float>(state), ptr<T>(out));
  });
  TF_CUDA_CHECK(cudaFreeAsync(buf, s));
}

}  // namespace tf::cuda
