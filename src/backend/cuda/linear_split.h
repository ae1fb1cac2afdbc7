// The split form's workspace and fold (linear_split.cu), used by linear_tc.cu. Plain C++ header.
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

}  // namespace tf::cuda
