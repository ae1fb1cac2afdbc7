// The programmatic dependent launch switch of pdl.cuh: on unless TF_CUDA_PDL=0; test_hooks::set_cuda_pdl.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/pdl.cuh"
#include "backend/test_hooks.h"

namespace tf::cuda {
std::atomic<int> g_pdl{-1};  // -1: not read from the environment yet

bool pdl_enabled() {
  int v = g_pdl.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("TF_CUDA_PDL");
    v = e && std::strcmp(e, "0") == 0 ? 0 : 1;
    int expected = -1;
    if (!g_pdl.compare_exchange_strong(expected, v)) v = expected;
  }
  return v == 1;
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_pdl(bool on) {
  tf::cuda::g_pdl.store(on ? 1 : 0, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
