// attention: bf16 with head_dim % 8 == 0 goes to the flash kernel (attention_tc.cu); the rest runs here,
// the CPU reference's arithmetic exactly: one block per (query row, head). Pass 1 finds the row's max score;
// pass 2 walks the keys in tiles of blockDim in increasing order: each thread scores one key of the tile,
// then thread 0 extends the running sum l key by key and every thread d accumulates rnd(p_j)·v_j[d] key by
// key. That is the CPU reference's order exactly (scores by dot8, one global max, sequential l and P·V), and
// it does not depend on how the queries were batched or chunked (docs/design.md, invariant 2).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

constexpr int kMaxHeadDim = 512;

// q[n_q, heads, d], k/v[n_k, kv_heads, d], ranges[n_q, 2], out[n_q, heads, d]. grid n_q * heads.
template <class T>
__global__ void attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                 const int32_t* __restrict__ ranges, float scale, T* __restrict__ out,
                                 int64_t heads, int64_t kv_heads, int64_t d,
                                 const int32_t* __restrict__ tables, int64_t max_blocks,
                                 const int32_t* __restrict__ seg_rows, int64_t n_seg) {
  extern __shared__ float ps[];  // [blockDim.x] probabilities of the current tile
  __shared__ float qs[kMaxHeadDim];
  __shared__ float red[32];
  __shared__ float l_sh;
  const int64_t t = blockIdx.x, i = t / heads, h = t % heads, kh = h / (heads / kv_heads);
  const int64_t b = ranges[2 * i], e = ranges[2 * i + 1];
  // Paged (paged_attention): logical key j of the row's segment lives at a row of the block pool.
  const int32_t* table = nullptr;
  if (tables) {
    int64_t lo = 0, hi = n_seg;  // the segment s with seg_rows[s] <= i < seg_rows[s + 1]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (seg_rows[mid] <= i)
        lo = mid;
      else
        hi = mid;
    }
    table = tables + lo * max_blocks;
  }
  auto row_of = [&](int64_t j) {
    return table ? static_cast<int64_t>(table[j / kKvBlock]) * kKvBlock + j % kKvBlock : j;
  };
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) qs[c] = to_f(q[t * d + c]);
  __syncthreads();
  auto score = [&](int64_t j) {
    const T* kr = k + (row_of(j) * kv_heads + kh) * d;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < d; ++c) acc[c & 7] += qs[c] * to_f(kr[c]);
    return combine8(acc) * scale;
  };
  // Pass 1: the maximum (exact under any order).
  float m = -INFINITY;
  for (int64_t j = b + threadIdx.x; j < e; j += blockDim.x) m = fmaxf(m, score(j));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = -INFINITY;
  for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) m = fmaxf(m, red[w]);
  // Pass 2: tiles of keys in increasing order.
  float acc = 0.0f, l = 0.0f;
  const int64_t c = threadIdx.x;
  for (int64_t j0 = b; j0 < e; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const int64_t len = e - j0 < static_cast<int64_t>(blockDim.x) ? e - j0 : blockDim.x;
    if (j < e) ps[threadIdx.x] = exp_f(score(j) - m);
    __syncthreads();
    if (threadIdx.x == 0)
      for (int64_t jj = 0; jj < len; ++jj) l += ps[jj];
    if (c < d)
      for (int64_t jj = 0; jj < len; ++jj)
        acc += rnd<T>(ps[jj]) * to_f(v[(row_of(j0 + jj) * kv_heads + kh) * d + c]);
    __syncthreads();
  }
  if (threadIdx.x == 0) l_sh = l;
  __syncthreads();
  if (c < d) out[t * d + c] = from_f<T>(acc / l_sh);
}

}  // namespace

void launch_attention(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& key_ranges, float scale, const Tensor& out) {
  const opcheck::AttentionDims a = opcheck::attention(q, k, v, key_ranges, out);
  const int64_t n_q = a.n_q, heads = a.heads, d = a.d, kv_heads = a.kv_heads;
  TF_CHECK(d <= kMaxHeadDim);
  if (n_q == 0 || heads == 0) return;
  if (attention_tc_applies(q, d)) return launch_attention_tc(s, q, k, v, key_ranges, scale, out);
  // Key ranges are device data; the model builds them valid ([begin, end) within the cache), as
  // the CPU op checks on its side.
  const int threads = d <= 128 ? 128 : (d <= 256 ? 256 : 512);
  TF_DISPATCH_ACT(q.dtype, T, {
    attention_kernel<T><<<static_cast<unsigned>(n_q * heads), threads, threads * sizeof(float), s>>>(
        ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const int32_t>(key_ranges), scale, ptr<T>(out),
        heads, kv_heads, d, nullptr, 0, nullptr, 0);
    TF_CUDA_LAUNCHED();
  });
}

void launch_paged_attention(cudaStream_t s, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                            const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                            float scale, const Tensor& out) {
  const opcheck::AttentionDims a =
      opcheck::paged_attention(q, k_pool, v_pool, tables, seg_rows, key_ranges, out);
  const int64_t n_q = a.n_q, heads = a.heads, d = a.d, kv_heads = a.kv_heads;
  TF_CHECK(d <= kMaxHeadDim);
  if (n_q == 0 || heads == 0) return;
  if (attention_tc_applies(q, d))
    return launch_paged_attention_tc(s, q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out);
  const int threads = d <= 128 ? 128 : (d <= 256 ? 256 : 512);
  TF_DISPATCH_ACT(q.dtype, T, {
    attention_kernel<T><<<static_cast<unsigned>(n_q * heads), threads, threads * sizeof(float), s>>>(
        ptr<const T>(q), ptr<const T>(k_pool), ptr<const T>(v_pool), ptr<const int32_t>(key_ranges), scale,
        ptr<T>(out), heads, kv_heads, d, ptr<const int32_t>(tables), tables.dim(1),
        ptr<const int32_t>(seg_rows), tables.dim(0));
    TF_CUDA_LAUNCHED();
  });
}

}  // namespace tf::cuda
