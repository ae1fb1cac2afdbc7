// Writes safetensors files the way the reference implementation lays them out: header padded with
// spaces to a multiple of 8 bytes, tensors packed back to back (largest element size first, then
// by name), so every tensor starts aligned to its element size. Used for captures and tests.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace tf {

class SafetensorsWriter {
 public:
  // Copies the bytes; `data` holds numel(shape) * dtype_size(dtype) bytes.
  Status add(const std::string& name, DType dtype, const Shape& shape, const void* data);
  Status add(const std::string& name, const Tensor& t) { return add(name, t.dtype, t.shape, t.data); }
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  size_t size() const { return tensors_.size(); }

  std::vector<uint8_t> serialize() const;
  // Writes to PATH.tmp then renames, so a reader never sees a half-written file.
  Status write(const std::string& path) const;

 private:
  struct Item {
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Item> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tf
