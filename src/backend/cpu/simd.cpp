// simd_on (simd.h): the CPU's AVX2, once; TF_CPU_SIMD=0 and the test hook turn the paths off.
#include "backend/cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/test_hooks.h"

namespace tf::cpu {
namespace {

bool cpu_has_avx2() {
#if TF_CPU_AVX2
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

std::atomic<int>& forced() {  // -1: the CPU and the environment decide; 0 / 1: a test set it
  static std::atomic<int> f{-1};
  return f;
}

}  // namespace

bool simd_on() {
  static const bool available = [] {
    const char* e = std::getenv("TF_CPU_SIMD");
    return cpu_has_avx2() && !(e && std::strcmp(e, "0") == 0);
  }();
  const int f = forced().load(std::memory_order_relaxed);
  return f < 0 ? available : f == 1 && cpu_has_avx2();
}

}  // namespace tf::cpu

namespace tf::test_hooks {
bool set_cpu_simd(int mode) {
  cpu::forced().store(mode < 0 ? -1 : mode > 0 ? 1 : 0, std::memory_order_relaxed);
  return cpu::cpu_has_avx2();
}
}  // namespace tf::test_hooks
