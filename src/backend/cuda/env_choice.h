// A configuration index read once from the environment (TF_CUDA_LINEAR_LARGE, TF_CUDA_LINEAR_SMALL,
// TF_CUDA_ATTENTION_VARIANT, TF_CUDA_LINEAR_SMALL_GRID: benchmarks of a candidate in whole runs, every choice
// giving the same bits).
#pragma once
#include <cstdio>
#include <cstdlib>

namespace tf::cuda {

// The value of `name` if it is an integer in [lo, hi]; dflt when unset or empty; dflt with a line on stderr
// when it is anything else.
inline int env_choice(const char* name, int lo, int hi, int dflt) {
  const char* e = std::getenv(name);
  if (!e || !*e) return dflt;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end || v < lo || v > hi) {
    std::fprintf(stderr, "%s=%s: not a choice in [%d, %d]; using %d\n", name, e, lo, hi, dflt);
    return dflt;
  }
  return static_cast<int>(v);
}

}  // namespace tf::cuda
