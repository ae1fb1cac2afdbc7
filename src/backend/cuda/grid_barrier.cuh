// A barrier across all blocks of one grid, for kernels whose blocks can all be resident at once (one block
// per SM and no more blocks than SMs: layer_tail.cu). State: two unsigned in device memory, [0] the blocks
// arrived at the current barrier (zero between barriers), [1] a generation bumped by each barrier's last
// arrival; no reset is needed between launches, so a captured graph can replay the kernel any number of
// times. One grid at a time may use a given state (a backend's stream runs one kernel at a time past its
// wait).
//
// Usage: `GridBarrier b(state)` once per block before its first barrier (it reads the generation: no
// barrier can complete before this block arrives, so the value is current), then `b.sync(blocks)` in every
// thread. The block's writes before sync() are visible to every block after it (bar.sync, then a release
// add / acquire load at gpu scope by one thread); reads of data other blocks wrote must bypass L1 (__ldcg),
// which may hold lines read before the barrier. A block that waits for more than ~10 s traps (a launch that
// could never have all its blocks resident fails with an error instead of hanging the device).
#pragma once
#include <cstdint>

namespace tf::cuda {

class GridBarrier {
 public:
  __device__ explicit GridBarrier(unsigned* state) : state_(state) {
    if (threadIdx.x == 0) gen_ = load_acquire(state + 1);
  }

  __device__ void sync(unsigned blocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned old;
      asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(state_) : "memory");
      ++gen_;
      if (old == blocks - 1) {  // the last arrival: reset the count, then release the others
        asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\n" ::"l"(state_) : "memory");
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(state_ + 1) : "memory");
      } else {
        const long long t0 = clock64();
        while (static_cast<int>(load_acquire(state_ + 1) - gen_) < 0)
          if (clock64() - t0 > (20LL << 30)) __trap();
      }
    }
    __syncthreads();
  }

 private:
  __device__ static unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
  }

  unsigned* state_;
  unsigned gen_ = 0;  // thread 0: the generation this block expects after its next barrier, less one
};

}  // namespace tf::cuda
