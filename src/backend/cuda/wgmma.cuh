// Hopper's warpgroup tensor-core instruction (wgmma.mma_async, sm_90a) for the *_sm90a.cu kernels
// (linear_tc_wgmma_sm90a.cu, attention_tc_wgmma_sm90a.cu): shared-memory descriptors, the fence / commit /
// wait of the asynchronous groups, the proxy fence after cp.async, and the host's check that the device can
// run sm_90a code at all.
//
// Accumulator layout (PTX ISA, "wgmma .m64nNk16" register fragments): warp w of the warpgroup holds rows
// 16 w .. 16 w + 15, and per 8-column group q the thread's d[4q .. 4q + 3] are mma.m16n8k16's C fragment
// (rows lane / 4 and + 8, columns 8q + 2 (lane % 4) + {0, 1}); an A operand in registers is mma.m16n8k16's A
// fragment of the warp's 16 rows.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace tf::cuda::wgmma {

// Shared-memory matrix descriptor for a 128-byte-swizzled operand whose tiles start at 1024-byte shared
// addresses (16-byte chunk c of 128-byte row r at chunk c ^ (r % 8)); 8-row groups 1024 bytes apart (the
// stride offset, bits 32-45). PTX ISA "Matrix Descriptor Format": start >> 4 in bits 0-13, leading offset >>
// 4 in 16-29, stride offset >> 4 in 32-45, swizzle mode in 62-63 (1: 128 bytes). K-major (rows along m or n,
// k contiguous): the leading offset is unused (16). MN-major with n one swizzle atom (64 bf16) wide (rows
// along k, n contiguous): 8-row groups along k are 1024 bytes apart and the offset between atoms along n is
// never used, so both offsets say 1024.
template <bool MN_MAJOR = false>
__device__ __forceinline__ uint64_t desc_sw128(uint32_t saddr) {
  constexpr uint64_t lbo = MN_MAJOR ? 1024 >> 4 : 1;
  return static_cast<uint64_t>((saddr & 0x3FFFF) >> 4) | (lbo << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins a register operand of wgmma in program order: the compiler may move plain register reads and writes
// across the fence / wait statements above (they name no registers), but not across this one, which reads and
// writes x. So: writes of an accumulator or A fragment, fence_operand, fence(), the wgmmas, commit(),
// wait<0>(), fence_operand, then its reads (PTX ISA: registers a wgmma reads must not be written between
// wgmma.fence and the wgmma, nor read or written while it is in flight).
__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
template <typename T, int N>
__device__ __forceinline__ void fence_operand(T (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_operand(x[i]);
}

// d[32] += A (64 x 16, descriptor a) · B (16 x 64, descriptor b), both operands K-major in shared memory; d
// in the accumulator layout above (d[4q .. 4q + 3]: columns 8q ..). The wgmma linear's m64 x n64 step and the
// flash attention's S = q · Kᵀ (variants 7, 8, its [8][4] scores viewed as 32). scale_d 0: d = A · B, d's
// values not read (no instruction has to zero it first: variant 8 keeps a wgmma in flight meanwhile).
__device__ __forceinline__ void m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b, int scale_d = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31 "
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d));
#else
  __trap();  // built for sm_90a only (the caller checks the device)
#endif
}

// cp.async wrote the stage through the generic proxy; wgmma reads it through the async proxy.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Compute capability 9.0 (the only devices sm_90a code runs on), for the calling thread's current device.
inline bool device_is_sm90() {
  static std::atomic<uint64_t> known{0}, yes{0};
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if (!(known.load(std::memory_order_acquire) & bit)) {
    int major = 0, minor = 0;
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    TF_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major == 9 && minor == 0) yes.fetch_or(bit, std::memory_order_acq_rel);
    known.fetch_or(bit, std::memory_order_acq_rel);
  }
  return (yes.load(std::memory_order_acquire) & bit) != 0;
}

}  // namespace tf::cuda::wgmma
