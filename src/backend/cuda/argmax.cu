// argmax and top_k over f32 logits, one block per row; ties resolve to the lower index (torch.argmax,
// and the CPU reference's ordering: value descending, then index ascending). top_k selects its k
// entries one after the other: pass r takes the best entry ranked after pass r-1's pick.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/row_scan.cuh"

namespace tf::cuda {
namespace {

constexpr int kThreads = 1024;

// logits[n, V] -> values[n, k], indices[n, k]; argmax is k = 1 without values.
__global__ void __launch_bounds__(kThreads)
    top_k_kernel(const float* __restrict__ logits, int64_t V, int64_t k, float* __restrict__ values,
                 int32_t* __restrict__ indices) {
  __shared__ Pick warp_best[kThreads / 32], result;
  const int64_t r = blockIdx.x;
  const float* l = logits + r * V;
  Pick prev{0.0f, -1};
  for (int64_t sel = 0; sel < k; ++sel) {
    Pick best{0.0f, -1};
    scan_row<kThreads>(l, V, [&](int64_t j, bool in, float v) {
      const Pick c{v, static_cast<int32_t>(j)};
      // Not taken already (ranked after prev), and better.
      if (in && (prev.i < 0 || before(prev, c)) && before(c, best)) best = c;
    });
    best = block_best(best, warp_best, &result);
    if (threadIdx.x == 0) {
      if (values) values[r * k + sel] = best.v;
      indices[r * k + sel] = best.i;
    }
    prev = best;
  }
}

}  // namespace

void launch_argmax(cudaStream_t s, const Tensor& logits, const Tensor& out) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32 && out.dtype == DType::I32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(out.numel() == n && V > 0);
  if (n == 0) return;
  top_k_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(ptr<const float>(logits), V, 1, nullptr,
                                                             ptr<int32_t>(out));
  TF_CUDA_LAUNCHED();
}

void launch_top_k(cudaStream_t s, const Tensor& logits, int64_t k, const Tensor& values,
                  const Tensor& indices) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(k >= 1 && k <= V && values.numel() == n * k && indices.numel() == n * k);
  TF_CHECK(values.dtype == DType::F32 && indices.dtype == DType::I32);
  if (n == 0) return;
  top_k_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(ptr<const float>(logits), V, k,
                                                             ptr<float>(values), ptr<int32_t>(indices));
  TF_CUDA_LAUNCHED();
}

}  // namespace tf::cuda
