// qkv_prep (backend/ops.h): one block per (row, head) of the fused q/k/v projection. A q or k head is
// staged in shared memory as f32, normalised as rms_norm_kernel does (block_sum_sq8, then the kWeight
// roundings), rotated as launch_rope does (three roundings), and stored: q to q_out, k to its K/V row
// (slots[i] or i); a v head is copied to its K/V row. Each value goes through exactly the arithmetic
// of rms_norm -> rope -> scatter_rows on this backend, so the fused op and the unfused ops give the
// same bits (the contract test checks it), in one launch instead of six.
//
// Shapes: qkv[n, (heads + 2 kv) * d], cos/sin[n, r], q_out[n, heads, d], k_out/v_out[m, kv, d].
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 128;

// grid (n, heads + 2 kv); dynamic shared memory d floats.
template <class T>
__global__ void __launch_bounds__(kThreads)
    qkv_prep_kernel(const T* __restrict__ qkv, const T* __restrict__ q_norm, const T* __restrict__ k_norm,
                    float eps, const T* __restrict__ cos, const T* __restrict__ sin,
                    const int32_t* __restrict__ slots, T* __restrict__ q_out, T* __restrict__ k_out,
                    T* __restrict__ v_out, int heads, int kv, int d, int r) {
  extern __shared__ float sx[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t i = blockIdx.x;
  const int hh = static_cast<int>(blockIdx.y);
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
    for (int j = threadIdx.x; j < d; j += blockDim.x) sx[j] = rnd<T>(to_f(nw[j]) * rnd<T>(sx[j] * inv));
    __syncthreads();
  }
  // launch_rope: pairs (j, j + r/2) rotated, dims >= r passed through.
  const int h2 = r / 2;
  const T* c = cos + i * r;
  const T* sn = sin + i * r;
  for (int j = threadIdx.x; j < h2; j += blockDim.x) {
    const float lo = sx[j], hi = sx[j + h2];
    const float c0 = to_f(c[j]), s0 = to_f(sn[j]), c1 = to_f(c[j + h2]), s1 = to_f(sn[j + h2]);
    dst[j] = from_f<T>(rnd<T>(lo * c0) + rnd<T>(-hi * s0));
    dst[j + h2] = from_f<T>(rnd<T>(hi * c1) + rnd<T>(lo * s1));
  }
  for (int j = r + threadIdx.x; j < d; j += blockDim.x) dst[j] = from_f<T>(sx[j]);
}

}  // namespace

void launch_qkv_prep(cudaStream_t s, const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                     const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
                     const Tensor& k_out, const Tensor& v_out) {
  const opcheck::QkvPrepDims a = opcheck::qkv_prep(qkv, q_norm, k_norm, cos, sin, slots, q_out, k_out, v_out);
  if (a.n == 0) return;
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
