#include "tensor/dtype.h"

#include <cmath>

namespace tf {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::BF16:
    case DType::F16:
    case DType::I16:
    case DType::U16:
      return 2;
    case DType::I64:
    case DType::F64:
      return 8;
    case DType::U8:
    case DType::BOOL:
    case DType::I8:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::U8:
      return "U8";
    case DType::BOOL:
      return "BOOL";
    case DType::F64:
      return "F64";
    case DType::I8:
      return "I8";
    case DType::I16:
      return "I16";
    case DType::U16:
      return "U16";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view n) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8, DType::BOOL,
                  DType::F64, DType::I8, DType::I16, DType::U16})
    if (dtype_name(t) == n) return t;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16: round abs * 2^24 to an integer, ties to even
    float a;
    std::memcpy(&a, &abs, 4);
    float scaled = a * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}
}  // namespace tf
