// The split form's workspace and fold (linear_split.cu) and the wgmma linear's other entry points, used by
// linear_tc.cu. Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tf::cuda {

// The current device's partials workspace when it holds `floats` floats (allocated once, at the first call
// outside a stream capture, and never moved: captured graphs keep its address), else null.
float* linear_partials(cudaStream_t s, int64_t floats);
// out[n, out_f] = rnd(fold of part[c, n, out_f] over c = 0 .. chunks - 1 in order, + bias).
void launch_linear_fold(cudaStream_t s, const float* part, int chunks, const uint16_t* bias, uint16_t* out,
                        int64_t n, int64_t out_f);
void launch_linear_fold(cudaStream_t s, const float* part, int chunks, const uint16_t* bias, float* out,
                        int64_t n, int64_t out_f);
// The partials on Hopper's wgmma (linear_tc_wgmma_sm90a.cu, configuration 11's 128 x 64 blocks, one per
// (tile, chunk)): false (nothing queued) on a device other than compute capability 9.0. x, w 16-byte aligned,
// in_f % 8 == 0, n, in_f, out_f < 2^30 (the caller checks).
bool launch_linear_tc_wgmma_split(cudaStream_t s, const uint16_t* x, const uint16_t* w, float* part,
                                  int64_t n, int64_t in_f, int64_t out_f);
// Configuration 10 or 11 (`which`; false, nothing queued, for the others or off compute capability 9.0) with
// a fused store: glu: w [2 out_f, in_f] gate | up, out [n, out_f] = glu of the two (no bias); else out is the
// residual stream h [n, out_f], h = rnd(h + rnd(x · w^T + bias)). planted: the intermediate rounding skipped
// (the contract's control). The same checks by the caller as above.
bool launch_linear_tc_wgmma_epi(cudaStream_t s, int which, bool glu, const uint16_t* x, const uint16_t* w,
                                const uint16_t* bias, uint16_t* out, int64_t n, int64_t in_f, int64_t out_f,
                                bool planted);
// The same with the fused q/k/v store (Backend::linear_qkv_prep, head_dim 64 rotated whole, no norms, K/V
// rows = x's rows): w [(heads + 2 kv) 64, in_f]; cos, sin [n, 64]; q [n, heads, 64], k, v [n, kv, 64];
// outputs 4-byte aligned (the caller checks).
bool launch_linear_tc_wgmma_qkv(cudaStream_t s, int which, const uint16_t* x, const uint16_t* w,
                                const uint16_t* bias, const uint16_t* cos, const uint16_t* sin, uint16_t* q,
                                uint16_t* k, uint16_t* v, int64_t n, int64_t in_f, int heads, int kv,
                                bool planted);

}  // namespace tf::cuda
