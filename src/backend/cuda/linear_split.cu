// The split form of the tensor-core linear (linear_tc.cu): for calls of a few dozen to a few hundred rows
// (many sequences decoding at once) the output tiles alone are too few to fill the SMs (1B o_proj at 128
// rows: 32 tiles of 64 x 64, each walking 2,048 of k), so the tiled kernel runs one block per (tile, chunk)
// and writes each chunk's partial p_c (its mma chain from zero, unrounded) to a workspace; this file holds
// the workspace and the fold that finishes each element as the unsplit kernels do:
//   out[i, j] = rnd(((p_0 + p_1) + p_2) + ... + p_{C-1} (+ bias_j)), f32 additions in chunk order,
// so the bits are those of every other configuration (contract: CudaContract.BatchInvarianceLinear*).
// Shapes: part [C, n, out_f] f32, bias [out_f] bf16 or null, out [n, out_f] bf16 or f32.
#include "backend/cuda/common.cuh"
#include "backend/cuda/device_workspace.h"
#include "backend/cuda/linear_split.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 256;
// 8 Mi floats (32 MiB): 1B gate_up at 256 rows takes 4 x 256 x 6,144 = 6.3 Mi.
constexpr int64_t kWorkspaceFloats = int64_t{8} << 20;

// One element per thread; grid (column blocks, rows).
template <class TO>
__global__ void __launch_bounds__(kThreads)
    linear_fold_kernel(const float* __restrict__ part, int chunks, const bf16_t* __restrict__ bias,
                       TO* __restrict__ out, int64_t n, int64_t out_f) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x, i = blockIdx.y;
  if (j >= out_f) return;
  const int64_t e = i * out_f + j, stride = n * out_f;
  float v = part[e];
  for (int c = 1; c < chunks; ++c) v += part[c * stride + e];
  if (bias) v += to_f(bias[j]);
  out[e] = from_f<TO>(v);
}

template <class TO>
void fold(cudaStream_t s, const float* part, int chunks, const bf16_t* bias, TO* out, int64_t n,
          int64_t out_f) {
  TF_CHECK(n > 0 && n <= 65535 && chunks > 0);
  linear_fold_kernel<TO><<<dim3(blocks_for(out_f, kThreads), static_cast<unsigned>(n)), kThreads, 0, s>>>(
      part, chunks, bias, out, n, out_f);
  TF_CUDA_LAUNCHED();
}

}  // namespace

float* linear_partials(cudaStream_t s, int64_t floats) {
  static DeviceWorkspace ws(kWorkspaceFloats);  // none: the callers run the unsplit tiles, same bits
  return ws.get(s, floats);
}

void launch_linear_fold(cudaStream_t s, const float* part, int chunks, const bf16_t* bias, bf16_t* out,
                        int64_t n, int64_t out_f) {
  fold(s, part, chunks, bias, out, n, out_f);
}
void launch_linear_fold(cudaStream_t s, const float* part, int chunks, const bf16_t* bias, float* out,
                        int64_t n, int64_t out_f) {
  fold(s, part, chunks, bias, out, n, out_f);
}

}  // namespace tf::cuda
