#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

namespace tf {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  TF_CHECK(!shape.empty() && begin >= 0 && begin <= end && end <= shape[0]);
  Shape s = shape;
  s[0] = end - begin;
  size_t row_bytes = shape[0] ? nbytes() / static_cast<size_t>(shape[0]) : 0;
  return Tensor{static_cast<char*>(data) + row_bytes * begin, dtype, s};
}

Tensor Tensor::reshaped(Shape s) const {
  TF_CHECK(shape_numel(s) == numel());
  return Tensor{data, dtype, std::move(s)};
}

void Buffer::Free::operator()(void* p) const { std::free(p); }

Buffer::Buffer(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_t n = nbytes();
  size_t alloc = (n + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  TF_CHECK(p != nullptr);
  std::memset(p, 0, alloc);
  mem_.reset(p);
}

void Buffer::reshape(Shape s) {
  TF_CHECK(shape_numel(s) == numel());
  shape_ = std::move(s);
}

float load_f32(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::F32:
      return t.as<float>()[i];
    case DType::BF16:
      return bf16_to_f32(t.as<uint16_t>()[i]);
    case DType::F16:
      return f16_to_f32(t.as<uint16_t>()[i]);
    case DType::I32:
      return static_cast<float>(t.as<int32_t>()[i]);
    case DType::I64:
      return static_cast<float>(t.as<int64_t>()[i]);
    case DType::U8:
      return static_cast<float>(t.as<uint8_t>()[i]);
    case DType::F64:
      return static_cast<float>(t.as<double>()[i]);
    default:
      TF_CHECK(false && "load_f32: unsupported dtype");
  }
  return 0;
}

void store_f32(const Tensor& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::F32:
      t.as<float>()[i] = v;
      return;
    case DType::BF16:
      t.as<uint16_t>()[i] = f32_to_bf16(v);
      return;
    case DType::F16:
      t.as<uint16_t>()[i] = f32_to_f16(v);
      return;
    default:
      TF_CHECK(false && "store_f32: unsupported dtype");
  }
}

std::vector<float> to_f32_vector(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_f32(t, i);
  return out;
}
}  // namespace tf
