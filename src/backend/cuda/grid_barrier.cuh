// A barrier across all blocks of one grid, for kernels whose blocks are all resident at once (one block per
// SM and no more blocks than SMs: layer_tail.cu). State: two unsigned in device memory, zero at the start
// and again after every barrier (count of blocks arrived, generation), so a captured graph can replay the
// kernel any number of times. One grid at a time may use a given state (a backend's stream is serial).
//
// Every thread of every block calls it. The block's writes before it are visible to every block after it
// (bar.sync, then one thread's gpu-scope fence before arriving and after leaving); reads of data that other
// blocks wrote must bypass L1 (ld.global.cg, __ldcg), which may hold lines read before the barrier.
// A block that waits for more than ~10 s traps (a launch that could never have all its blocks resident
// fails with an error instead of hanging the device).
#pragma once
#include <cstdint>

namespace tf::cuda {

__device__ __forceinline__ void grid_barrier(unsigned* state, unsigned blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = state + 1;
    const unsigned g = *gen;  // before arriving: the last block bumps it only after everyone arrived
    __threadfence();
    if (atomicAdd(state, 1u) == blocks - 1) {
      atomicExch(state, 0u);
      __threadfence();
      atomicAdd(state + 1, 1u);
    } else {
      const long long t0 = clock64();
      while (*gen == g)
        if (clock64() - t0 > (20LL << 30)) __trap();
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace tf::cuda
