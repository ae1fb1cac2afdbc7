// simd_on (simd.h): the CPU's AVX2, once; TF_CPU_SIMD=0 and the test hook turn the paths off.
#include "backend/cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/test_hooks.h"
#include "tensor/dtype.h"

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

#if TF_CPU_AVX2
TF_AVX2 void bf16_row_avx2(const uint16_t* s, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_bf16(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}
#endif

}  // namespace

void bf16_row_to_f32(const uint16_t* s, int64_t n, float* dst) {
#if TF_CPU_AVX2
  if (n >= 8 && simd_on()) {
    bf16_row_avx2(s, n, dst);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

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
