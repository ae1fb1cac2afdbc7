// Programmatic dependent launch (Hopper): a kernel launched with launch_pdl may start while the kernel before
// it in the stream is still running, once every block of that one has called pdl_trigger() (or exited). Each
// such kernel calls pdl_wait() in every thread before it touches memory that an earlier kernel writes or
// reads (weights may be read before), so the stream's order is what every kernel sees; what overlaps is the
// launch, the block start-up and the weight prologue of the next kernel with the tail of this one. Only the
// schedule changes, never an operation: a row's bits are the same with it on or off (TF_CUDA_PDL=0, or
// test_hooks::set_cuda_pdl(false), launches every kernel plainly; the contract and the model tests compare).
// Used by the kernels of a decode step (norms, linears, q/k/v prep, attention, the elementwise ops).
#pragma once
#include <cuda_runtime_api.h>

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace tf::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Whether launch_pdl sets the attribute (TF_CUDA_PDL, test_hooks::set_cuda_pdl; on by default).
bool pdl_enabled();

// kernel<<<grid, block, smem, s>>>(args...), with programmatic stream serialization when enabled. The kernel
// must call pdl_wait() as described above.
template <class... P, class... A>
void launch_pdl(cudaStream_t s, dim3 grid, dim3 block, size_t smem, void (*kernel)(P...), A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  TF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

}  // namespace tf::cuda
