// Tensor: a non-owning view (data pointer, dtype, shape in PyTorch order, contiguous row-major).
// Buffer: owning, 64-byte aligned host memory. Device memory belongs to backends.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tf {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape shape;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  int rank() const { return static_cast<int>(shape.size()); }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Rows [begin, end) of the first dimension, as a view.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  Tensor reshaped(Shape s) const;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, Shape shape);  // zero-filled
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;
  Tensor view() const { return Tensor{mem_.get(), dtype_, shape_}; }
  operator Tensor() const { return view(); }  // NOLINT(google-explicit-constructor)
  void* data() const { return mem_.get(); }
  template <class T>
  T* as() const {
    return static_cast<T*>(static_cast<void*>(mem_.get()));
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  // Reinterpret with a new shape of the same element count.
  void reshape(Shape s);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> mem_;
  DType dtype_ = DType::F32;
  Shape shape_;
};

// Element access helpers converting to/from f32 for f32/bf16/f16 tensors (tests, references).
float load_f32(const Tensor& t, int64_t i);
void store_f32(const Tensor& t, int64_t i, float v);
std::vector<float> to_f32_vector(const Tensor& t);

}  // namespace tf
