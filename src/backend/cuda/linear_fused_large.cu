// The large-row fused stores (TF_CUDA_FUSED_LINEAR bit 16; kernels.h launch_linear_large_fused /
// launch_linear_large_qkv): a chain op of >= 17 rows whose plain linear would run on the wgmma blocks
// (linear_tc.cu large_fused_config: not the split form, configuration 10 or 11) runs as one wgmma kernel with
// the chain's second step in its store (linear_tc_wgmma_sm90a.cu, top): linear_add's residual add, the glu of
// rms_norm_linear_glu, linear_qkv_prep's RoPE and q / k / v scatter. Each checks what its store assumes
// (bf16 outputs, their shapes, 4-byte aligned q / k / v) and returns false, nothing queued, elsewhere: the
// caller then runs the ops in turn, which give the same bits (CudaContract.LargeEpilogues*).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/linear_split.h"

#include <initializer_list>

namespace tf::cuda {

bool launch_linear_large_fused(cudaStream_t s, bool glu, const Tensor& x, const Tensor& w, const Tensor* bias,
                               const Tensor& out) {
  const int64_t n = x.dim(0), in_f = x.dim(1), out_f = out.dim(1);
  const int config = large_fused_config(x, w);
  if (config == 0 || out.dtype != DType::BF16 || w.dim(0) != (glu ? 2 * out_f : out_f) || (glu && bias) ||
      (bias && bias->dtype != DType::BF16))
    return false;
  if (!launch_linear_tc_wgmma_epi(s, config, glu, ptr<const bf16_t>(x), ptr<const bf16_t>(w),
                                  bias ? ptr<const bf16_t>(*bias) : nullptr, ptr<bf16_t>(out), n, in_f, out_f,
                                  large_fused_planted()))
    return false;
  large_fused_launched();
  return true;
}

bool launch_linear_large_qkv(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias,
                             const Tensor& cos, const Tensor& sin, const Tensor& q, const Tensor& k,
                             const Tensor& v) {
  const int64_t n = x.dim(0), in_f = x.dim(1), w_rows = w.dim(0);
  const int config = large_fused_config(x, w);
  if (config == 0 || q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || cos.rank() != 2 || sin.rank() != 2)
    return false;
  const int64_t heads = q.dim(1), kv = k.dim(1);
  for (const Tensor* t : {&cos, &sin, &q, &k, &v})
    if (t->dtype != DType::BF16 || reinterpret_cast<uintptr_t>(t->data) % 4 != 0) return false;
  if ((bias && bias->dtype != DType::BF16) || q.dim(0) != n || q.dim(2) != 64 || k.dim(0) != n ||
      k.dim(2) != 64 || v.dim(0) != n || v.dim(1) != kv || v.dim(2) != 64 || cos.dim(0) != n ||
      cos.dim(1) != 64 || sin.dim(0) != n || sin.dim(1) != 64 || w_rows != (heads + 2 * kv) * 64)
    return false;
  if (!launch_linear_tc_wgmma_qkv(s, config, ptr<const bf16_t>(x), ptr<const bf16_t>(w),
                                  bias ? ptr<const bf16_t>(*bias) : nullptr, ptr<const bf16_t>(cos),
                                  ptr<const bf16_t>(sin), ptr<bf16_t>(q), ptr<bf16_t>(k), ptr<bf16_t>(v), n,
                                  in_f, static_cast<int>(heads), static_cast<int>(kv), large_fused_planted()))
    return false;
  large_fused_launched();
  return true;
}

}  // namespace tf::cuda
