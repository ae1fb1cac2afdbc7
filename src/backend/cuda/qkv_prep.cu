// qkv_prep (backend/ops.h): one block per (row, head) of the fused q/k/v projection. A q or k head is
// staged in shared memory as f32, normalised as rms_norm_kernel does (block_sum_sq8, then the kWeight
// roundings), rotated as launch_rope does (three roundings), and stored: q to q_out, k to its K/V row
// (slots[i] or i); a v head is copied to its K/V row. Each value goes through exactly the arithmetic
// of rms_norm -> rope -> scatter_rows on this backend, so the fused op and the unfused ops give the
// same bits (the contract test checks it), in one launch instead of six. Calls of >= kRowFormMinRows rows run
// the plain form without norms (qkv_prep_plain_kernel: a thread per 8 values, or per value where rows are
// not 16-byte multiples), else the warp form
// for heads up to 1024 wide (qkv_prep_warp_kernel: a warp per (row, head)); the rest the block form
// (qkv_prep_kernel).
//
// Shapes: qkv[n, (heads + 2 kv) * d], cos/sin[n, r], q_out[n, heads, d], k_out/v_out[m, kv, d].
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/vec8.cuh"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 128;

// launch_rope's statements for one pair (lo, hi) of a head (three roundings each, the last at the store):
// every form's rope. rope_lo: the value at j (cos, sin at j); rope_hi: at j + h2 (cos, sin at j + h2).
template <class T>
__device__ __forceinline__ float rope_lo(float lo, float hi, float c, float s) {
  return rnd<T>(lo * c) + rnd<T>(-hi * s);
}
template <class T>
__device__ __forceinline__ float rope_hi(float lo, float hi, float c, float s) {
  return rnd<T>(hi * c) + rnd<T>(lo * s);
}
// The pair (j, j + h2) of a head, stored into dst.
template <class T>
__device__ __forceinline__ void rope_pair(float lo, float hi, const T* c, const T* sn, int j, int h2,
                                          T* dst) {
  const float c0 = to_f(c[j]), s0 = to_f(sn[j]), c1 = to_f(c[j + h2]), s1 = to_f(sn[j + h2]);
  dst[j] = from_f<T>(rope_lo<T>(lo, hi, c0, s0));
  dst[j + h2] = from_f<T>(rope_hi<T>(lo, hi, c1, s1));
}

// grid (n, heads + 2 kv); dynamic shared memory d floats.
template <class T>
__global__ void __launch_bounds__(kThreads)
    qkv_prep_kernel(const T* __restrict__ qkv, const T* __restrict__ q_norm, const T* __restrict__ k_norm,
                    float eps, const T* __restrict__ cos, const T* __restrict__ sin,
                    const int32_t* __restrict__ slots, T* __restrict__ q_out, T* __restrict__ k_out,
                    T* __restrict__ v_out, int heads, int kv, int d, int r) {
  extern __shared__ float sx[];
  const int64_t i = blockIdx.x;
  const int hh = static_cast<int>(blockIdx.y);
  // The norm weight element of this thread (heads up to kThreads wide), which no kernel writes, read before
  // waiting for the previous kernel (pdl.cuh): off a decode step's critical path.
  const T* nw_pre = hh < heads ? q_norm : hh < heads + kv ? k_norm : nullptr;
  const bool pre = nw_pre && d <= static_cast<int>(blockDim.x);
  const float w_pre = pre && static_cast<int>(threadIdx.x) < d ? to_f(nw_pre[threadIdx.x]) : 0.0f;
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const T* src = qkv + i * static_cast<int64_t>(heads + 2 * kv) * d + static_cast<int64_t>(hh) * d;
  const int64_t kv_row = slots ? static_cast<int64_t>(slots[i]) : i;
  if (hh >= heads && kv_row < 0) return;  // a padding row's k and v are not stored
  if (hh >= heads + kv) {                 // a v head: placed as it is
    T* dst = v_out + (kv_row * kv + (hh - heads - kv)) * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) dst[j] = src[j];
    return;
  }
  const bool is_q = hh < heads;
  T* dst = is_q ? q_out + (i * heads + hh) * d : k_out + (kv_row * kv + (hh - heads)) * d;
  const T* nw = is_q ? q_norm : k_norm;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sx[j] = to_f(src[j]);
  __syncthreads();
  if (nw) {  // rms_norm_kernel, kWeight, staged
    const float ss = block_sum_sq8(d, [&](int64_t k) { return sx[k]; });
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      sx[j] = rnd<T>((pre ? w_pre : to_f(nw[j])) * rnd<T>(sx[j] * inv));  // pre: j is the thread's one
    __syncthreads();
  }
  // launch_rope: pairs (j, j + r/2) rotated, dims >= r passed through.
  const int h2 = r / 2;
  const T* c = cos + i * r;
  const T* sn = sin + i * r;
  for (int j = threadIdx.x; j < h2; j += blockDim.x) {
    const float lo = sx[j], hi = sx[j + h2];
    rope_pair(lo, hi, c, sn, j, h2, dst);
  }
  for (int j = r + threadIdx.x; j < d; j += blockDim.x) dst[j] = from_f<T>(sx[j]);
}

// The warp form: one warp per (row, head), kWarps of them per block, the head staged in the warp's slice
// of shared memory; the kernel above's statements with the block's barriers made the warp's and its
// block_sum_sq8 made warp_sum_sq8 (the same lane sums and tree), so the same bits. One 128-thread block
// per 64-wide head left half its threads idle and paid a block barrier per step: a vision call of [9350,
// 3072] took ~544 us (the bytes: ~28 us). grid ceil(n * (heads + 2 kv) / kWarps); shared kWarps * d floats.
constexpr int kWarps = 8;

template <class T>
__global__ void __launch_bounds__(32 * kWarps)
    qkv_prep_warp_kernel(const T* __restrict__ qkv, const T* __restrict__ q_norm,
                         const T* __restrict__ k_norm, float eps, const T* __restrict__ cos,
                         const T* __restrict__ sin, const int32_t* __restrict__ slots, T* __restrict__ q_out,
                         T* __restrict__ k_out, T* __restrict__ v_out, int64_t items, int heads, int kv,
                         int d, int r) {
  extern __shared__ float sxs[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (item >= items) return;
  const int per_row = heads + 2 * kv;
  const int64_t i = item / per_row;
  const int hh = static_cast<int>(item - i * per_row);
  const T* src = qkv + i * static_cast<int64_t>(per_row) * d + static_cast<int64_t>(hh) * d;
  const int64_t kv_row = slots ? static_cast<int64_t>(slots[i]) : i;
  if (hh >= heads && kv_row < 0) return;  // a padding row's k and v are not stored
  if (hh >= heads + kv) {                 // a v head: placed as it is
    T* dst = v_out + (kv_row * kv + (hh - heads - kv)) * d;
    for (int j = lane; j < d; j += 32) dst[j] = src[j];
    return;
  }
  const bool is_q = hh < heads;
  T* dst = is_q ? q_out + (i * heads + hh) * d : k_out + (kv_row * kv + (hh - heads)) * d;
  const T* nw = is_q ? q_norm : k_norm;
  float* sx = sxs + warp * d;
  for (int j = lane; j < d; j += 32) sx[j] = to_f(src[j]);
  __syncwarp();
  if (nw) {  // rms_norm_kernel, kWeight, staged
    const float ss = warp_sum_sq8(sx, d, lane);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
    for (int j = lane; j < d; j += 32) sx[j] = rnd<T>(to_f(nw[j]) * rnd<T>(sx[j] * inv));
    __syncwarp();
  }
  const int h2 = r / 2;
  const T* c = cos + i * r;
  const T* sn = sin + i * r;
  for (int j = lane; j < h2; j += 32) {
    const float lo = sx[j], hi = sx[j + h2];
    rope_pair(lo, hi, c, sn, j, h2, dst);
  }
  for (int j = r + lane; j < d; j += 32) dst[j] = from_f<T>(sx[j]);
}

// W consecutive values as f32 (W = 8: one 16-byte bf16 access, vec8.cuh) and back with a scalar store's
// rounding.
template <int W, class T>
__device__ __forceinline__ void load_w(const T* __restrict__ p, float (&v)[W]) {
  if constexpr (W == 8)
    load8(p, v);
  else
    for (int k = 0; k < W; ++k) v[k] = to_f(p[k]);
}
template <int W, class T>
__device__ __forceinline__ void store_w(T* __restrict__ p, const float (&v)[W]) {
  if constexpr (W == 8)
    store8(p, v);
  else
    for (int k = 0; k < W; ++k) p[k] = from_f<T>(v[k]);
}

// Without q and k norms (the vision towers) a value needs nothing of its head but its rope partner: thread x
// of the grid's x takes the W consecutive positions e = W x .. W x + W - 1 of the row's (heads + 2 kv) * d
// (one head's dims j .. j + W - 1) in rows y, y + gridDim.y, ...: v values are copied, q or k values below r
// / 2 rotated with their partners j + r/2 (the kernels' rope statements, value by value), those at or past r
// passed through. No staging, no barrier. W = 8 where rows are 16-byte multiples (d % 8 == 0, r % 16 == 0):
// one value per thread left a vision call ([9,350, 3,072]) 112,000 blocks with too few bytes in flight, 165
// us for 28 us of bytes; 8 per thread take 91 (BENCHMARKS.md).
template <class T, int W>
__global__ void qkv_prep_plain_kernel(const T* __restrict__ qkv, const T* __restrict__ cos,
                                      const T* __restrict__ sin, const int32_t* __restrict__ slots,
                                      T* __restrict__ q_out, T* __restrict__ k_out, T* __restrict__ v_out,
                                      int64_t n, int heads, int kv, int d, int r) {
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int per_row = heads + 2 * kv;
  const int e = W * static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (e >= per_row * d) return;
  const int hh = e / d, j = e - hh * d, h2 = r / 2;
  if (hh < heads + kv && j >= h2 && j < r) return;  // rotated by the thread of j - r/2
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const T* src = qkv + i * static_cast<int64_t>(per_row) * d + static_cast<int64_t>(hh) * d + j;
    const int64_t kv_row = slots ? static_cast<int64_t>(slots[i]) : i;
    if (hh >= heads && kv_row < 0) continue;  // a padding row's k and v are not stored
    if (hh >= heads + kv) {                   // copied as it is
      T* dst = v_out + (kv_row * kv + (hh - heads - kv)) * d + j;
      if constexpr (W == 8)
        for (int c = 0; c < static_cast<int>(sizeof(T)) / 2; ++c)
          reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
      else
        for (int k = 0; k < W; ++k) dst[k] = src[k];
      continue;
    }
    T* dst = (hh < heads ? q_out + (i * heads + hh) * d : k_out + (kv_row * kv + (hh - heads)) * d) + j;
    float lo[W];
    load_w<W>(src, lo);
    if (j >= r) {
      store_w<W>(dst, lo);
      continue;
    }
    float hi[W], c0[W], s0[W], c1[W], s1[W], a[W], b[W];
    load_w<W>(src + h2, hi);
    load_w<W>(cos + i * r + j, c0);
    load_w<W>(sin + i * r + j, s0);
    load_w<W>(cos + i * r + j + h2, c1);
    load_w<W>(sin + i * r + j + h2, s1);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      a[k] = rope_lo<T>(lo[k], hi[k], c0[k], s0[k]);
      b[k] = rope_hi<T>(lo[k], hi[k], c1[k], s1[k]);
    }
    store_w<W>(dst, a);
    store_w<W>(dst + h2, b);
  }
}

}  // namespace

void launch_qkv_prep(cudaStream_t s, const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                     const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
                     const Tensor& k_out, const Tensor& v_out) {
  const opcheck::QkvPrepDims a = opcheck::qkv_prep(qkv, q_norm, k_norm, cos, sin, slots, q_out, k_out, v_out);
  if (a.n == 0) return;
  const int64_t per_row = a.heads + 2 * a.kv_heads;
  if (!q_norm && !k_norm && a.n >= kRowFormMinRows &&
      per_row * a.d < (int64_t{1} << 30)) {  // no norms: the plain form, 8 values a thread where rows allow
    const bool w8 = a.d % 8 == 0 && a.r % 16 == 0 && aligned16(qkv.data) && aligned16(cos.data) &&
                    aligned16(sin.data) && aligned16(q_out.data) && aligned16(k_out.data) &&
                    aligned16(v_out.data);
    const dim3 grid(blocks_for(per_row * a.d / (w8 ? 8 : 1), 256),
                    static_cast<unsigned>(std::min<int64_t>(a.n, 65535)));
    TF_DISPATCH_ACT(qkv.dtype, T, {
      auto kernel = w8 ? qkv_prep_plain_kernel<T, 8> : qkv_prep_plain_kernel<T, 1>;
      launch_pdl(s, grid, dim3(256), 0, kernel, ptr<const T>(qkv), ptr<const T>(cos), ptr<const T>(sin),
                 slots ? ptr<const int32_t>(*slots) : nullptr, ptr<T>(q_out), ptr<T>(k_out), ptr<T>(v_out),
                 a.n, static_cast<int>(a.heads), static_cast<int>(a.kv_heads), static_cast<int>(a.d),
                 static_cast<int>(a.r));
    });
    return;
  }
  // The warp form (shared memory: kWarps * d floats, at most 32 KB) for prefill and vision calls; a decode
  // step's few rows keep one block per head.
  if (a.d <= 1024 && a.n >= kRowFormMinRows) {
    const int64_t items = a.n * per_row;
    TF_CHECK((items + kWarps - 1) / kWarps < (int64_t{1} << 31));
    TF_DISPATCH_ACT(qkv.dtype, T, {
      launch_pdl(s, dim3(blocks_for(items, kWarps)), dim3(32 * kWarps), kWarps * a.d * sizeof(float),
                 qkv_prep_warp_kernel<T>, ptr<const T>(qkv), q_norm ? ptr<const T>(*q_norm) : nullptr,
                 k_norm ? ptr<const T>(*k_norm) : nullptr, eps, ptr<const T>(cos), ptr<const T>(sin),
                 slots ? ptr<const int32_t>(*slots) : nullptr, ptr<T>(q_out), ptr<T>(k_out), ptr<T>(v_out),
                 items, static_cast<int>(a.heads), static_cast<int>(a.kv_heads), static_cast<int>(a.d),
                 static_cast<int>(a.r));
    });
    return;
  }
  TF_CHECK(a.heads + 2 * a.kv_heads <= 65535 && a.d <= 8192);
  const dim3 grid(static_cast<unsigned>(a.n), static_cast<unsigned>(a.heads + 2 * a.kv_heads));
  TF_DISPATCH_ACT(qkv.dtype, T, {
    launch_pdl(s, grid, dim3(kThreads), a.d * sizeof(float), qkv_prep_kernel<T>, ptr<const T>(qkv),
               q_norm ? ptr<const T>(*q_norm) : nullptr, k_norm ? ptr<const T>(*k_norm) : nullptr, eps,
               ptr<const T>(cos), ptr<const T>(sin), slots ? ptr<const int32_t>(*slots) : nullptr,
               ptr<T>(q_out), ptr<T>(k_out), ptr<T>(v_out), static_cast<int>(a.heads),
               static_cast<int>(a.kv_heads), static_cast<int>(a.d), static_cast<int>(a.r));
  });
}

}  // namespace tf::cuda
