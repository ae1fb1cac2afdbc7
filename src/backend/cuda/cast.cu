// cast: F32 <-> BF16 (RNE), or a device copy when the dtypes match.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"

namespace tf::cuda {

void launch_cast(cudaStream_t s, const Tensor& x, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && is_float_act(x.dtype) && is_float_act(out.dtype));
  if (x.dtype == out.dtype) {
    if (x.data != out.data && x.nbytes())
      TF_CUDA_CHECK(cudaMemcpyAsync(out.data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, s));
    return;
  }
  if (x.dtype == DType::F32) {
    const float* a = ptr<const float>(x);
    bf16_t* o = ptr<bf16_t>(out);
    launch_elementwise(s, x.numel(), [=] __device__(int64_t i) { o[i] = f2bf(a[i]); });
  } else {
    const bf16_t* a = ptr<const bf16_t>(x);
    float* o = ptr<float>(out);
    launch_elementwise(s, x.numel(), [=] __device__(int64_t i) { o[i] = to_f(a[i]); });
  }
}

}  // namespace tf::cuda
