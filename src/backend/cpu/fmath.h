// The CPU reference's f32 transcendentals, in one of two modes:
//   kLibm (default): glibc's float functions (expf, erff, tanhf, cosf, sinf, log1pf). The goldens and
//     the parity numbers are measured with these.
//   kDouble: each evaluated in double and rounded once to f32 (correctly rounded but in cases rarer
//     than 1 in 2^28), which is what the CUDA kernels do (cuda/common.cuh). The CUDA contract tests
//     switch the CPU reference to it, so every op, transcendental ones included, must agree bit for
//     bit; between kLibm and kDouble, 1-2 ulp in a few percent of elements.
// The mode is process-wide and meant to be set once, before any op runs (tests only).
#pragma once
#include <atomic>
#include <cmath>

namespace tf::fm {

enum class Mode { kLibm, kDouble };

inline std::atomic<int>& mode_flag() {
  static std::atomic<int> m{0};
  return m;
}
inline void set_mode(Mode m) { mode_flag().store(m == Mode::kDouble ? 1 : 0, std::memory_order_relaxed); }
inline bool in_double() { return mode_flag().load(std::memory_order_relaxed) != 0; }

#define TF_FM_FN(name)                                                                         \
  inline float name(float x) {                                                                 \
    return in_double() ? static_cast<float>(std::name(static_cast<double>(x))) : std::name(x); \
  }
TF_FM_FN(exp)
TF_FM_FN(erf)
TF_FM_FN(tanh)
TF_FM_FN(cos)
TF_FM_FN(sin)
TF_FM_FN(log1p)
#undef TF_FM_FN

}  // namespace tf::fm
