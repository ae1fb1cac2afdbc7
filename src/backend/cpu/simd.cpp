// simd_level (simd.h): the CPU's AVX2 / AVX-512, once; TF_CPU_SIMD and the test hook cap it.
#include "backend/cpu/simd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/test_hooks.h"
#include "tensor/dtype.h"

namespace tf::cpu {
namespace {

// What the CPU offers: 0 neither, 1 AVX2, 2 AVX2 and AVX-512 (F, BW, DQ, VL: what TF_AVX512 code uses).
int cpu_level() {
#if TF_CPU_AVX2
  static const int level = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) return 0;
    const bool v512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return v512 ? 2 : 1;
  }();
  return level;
#else
  return 0;
#endif
}

std::atomic<int>& forced() {  // -1: the CPU and the environment decide; 0 / 1 / 2: a test set the cap
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

int simd_level() {
  static const int production = [] {  // TF_CPU_SIMD: 0 none, avx2 (or 1) at most AVX2, unset the CPU's best
    const char* e = std::getenv("TF_CPU_SIMD");
    int cap = 2;
    if (e && (std::strcmp(e, "0") == 0)) cap = 0;
    if (e && (std::strcmp(e, "avx2") == 0 || std::strcmp(e, "1") == 0)) cap = 1;
    return std::min(cap, cpu_level());
  }();
  const int f = forced().load(std::memory_order_relaxed);
  return f < 0 ? production : std::min(f, cpu_level());
}

bool simd_on() { return simd_level() >= 1; }

}  // namespace tf::cpu

namespace tf::test_hooks {
bool set_cpu_simd(int mode) {
  cpu::forced().store(mode < 0 ? -1 : std::min(mode, 2), std::memory_order_relaxed);
  return cpu::cpu_level() >= std::max(mode, 1);
}
}  // namespace tf::test_hooks
