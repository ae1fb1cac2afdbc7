// Element types and the bf16/f16 <-> f32 conversions with PyTorch's rounding
// (round to nearest, ties to even; NaN stays a quiet NaN).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace tf {

enum class DType : uint8_t { F32, BF16, F16, I32, I64, U8, BOOL, F64, I8, I16, U16 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);                         // safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);  // inverse of dtype_name

struct bf16 {
  uint16_t bits;
};

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The value f32 -> bf16 -> f32: where Transformers rounds an activation to bf16.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace tf
