// The merge of the flash attention's split-parallel form (attention_split.cuh): out[i, h, :] = the fold of
// the (m_z, l_z, acc_z) that attention_tc.cu's blocks wrote for splits z = 0 .. n_split - 1, in split order,
// with the fold's expressions, so the row's bits are those of the same row folded inside one block (prefill,
// vision). Its CPU reference is the CPU attention itself (the contract holds the whole op to it).
//
// Shapes: part.ml [n_split, n_q, heads, 2] f32, part.acc [n_split, n_q, heads, d] f32, out [n_q, heads, d]
// bf16. One block of 128 threads per (row, head); each thread folds the columns col, col + 128 (d <= 256),
// every thread recomputing the same (M, L) chain.
#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_workspace.h"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda {
namespace {

constexpr int kThreads = 128;
// The workspace: enough for 256 decode rows x 16 heads x 15 splits (7,680 keys) at head_dim 128.
constexpr int64_t kWorkspaceFloats = int64_t{16} << 20;  // 64 MiB

__global__ void __launch_bounds__(kThreads)
    attention_merge_kernel(attn::Partials part, int64_t n_q, int heads, int d, bf16_t* __restrict__ out) {
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t row_head = blockIdx.x;  // i * heads + h
  const int64_t stride = n_q * heads;   // one split's (row, head) entries
  for (int col = threadIdx.x; col < d; col += kThreads)
    out[row_head * d + col] = f2bf(attn::merge_splits(part, stride, row_head, d, col));
}

}  // namespace

float* attention_partials(cudaStream_t s, int64_t floats) {
  static DeviceWorkspace ws(kWorkspaceFloats);  // none: the callers fold in the block instead, same bits
  return ws.get(s, floats);
}

int* attention_merge_counters(cudaStream_t s, int64_t n) {
  // 1 Mi counters (4 MiB): a decode step's (piece, head group) columns, e.g. 256 sequences x 64 heads.
  static DeviceWorkspace ws(int64_t{1} << 20, /*zeroed=*/true);
  return reinterpret_cast<int*>(ws.get(s, n));
}

void launch_attention_merge(cudaStream_t s, const attn::Partials& part, int64_t n_q, int heads, int d,
                            bf16_t* out) {
  TF_CHECK(d <= 2 * kThreads && part.n_split > 0);
  const int64_t blocks = n_q * heads;
  if (blocks == 0) return;
  TF_CHECK(blocks < (int64_t{1} << 31));
  launch_pdl(s, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, attention_merge_kernel, part, n_q,
             heads, d, out);
}

}  // namespace tf::cuda
