// Shared helpers for the CPU reference ops: f32 <-> act conversion of rows and the one dot product
// every reduction uses. The dot's summation order is a function of the length only: lane l sums
// elements k ≡ l (mod 8) in increasing k, then the 8 lanes are combined as
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). It is the same for every row, batch size and thread count.
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/cpu/simd.h"
#include "base/thread_pool.h"
#include "tensor/tensor.h"

namespace tf::cpu {

inline float rnd(float v, DType act) { return act == DType::BF16 ? round_bf16(v) : v; }

inline bool is_float_act(DType t) { return t == DType::F32 || t == DType::BF16; }

// Elements [off, off+n) of a F32/BF16 tensor as f32.
inline void load_f32_row(const Tensor& t, int64_t off, int64_t n, float* dst) {
  if (t.dtype == DType::F32) {
    std::memcpy(dst, t.as<const float>() + off, static_cast<size_t>(n) * 4);
  } else {
    bf16_row_to_f32(t.as<const uint16_t>() + off, n, dst);
  }
}

// Store f32 values into a F32/BF16 tensor (RNE for bf16).
inline void store_f32_row(const Tensor& t, int64_t off, int64_t n, const float* src) {
  if (t.dtype == DType::F32) {
    std::memcpy(t.as<float>() + off, src, static_cast<size_t>(n) * 4);
  } else {
    uint16_t* d = t.as<uint16_t>() + off;
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
  }
}

inline float combine8(const float* acc) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
  for (int l = 0; k + l < n; ++l) acc[l] += a[k + l] * b[k + l];
  return combine8(acc);
}

// Same order as dot_f32, with b given as bf16 bits (converted exactly).
inline float dot_f32_bf16(const float* a, const uint16_t* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * bf16_to_f32(b[k + l]);
  for (int l = 0; k + l < n; ++l) acc[l] += a[k + l] * bf16_to_f32(b[k + l]);
  return combine8(acc);
}

// Σ x² in the dot order.
inline float sum_sq(const float* a, int64_t n) { return dot_f32(a, a, n); }

// Σ x in the dot order.
inline float sum_f32(const float* a, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l];
  for (int l = 0; k + l < n; ++l) acc[l] += a[k + l];
  return combine8(acc);
}

}  // namespace tf::cpu
