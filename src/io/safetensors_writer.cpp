#include "io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace tf {

Status SafetensorsWriter::add(const std::string& name, DType dtype, const Shape& shape, const void* data) {
  if (name == "__metadata__") return make_error("safetensors writer: '__metadata__' is not a tensor name");
  if (tensors_.count(name)) return make_error("safetensors writer: tensor '" + name + "' added twice");
  for (int64_t d : shape)
    if (d < 0)
      return make_error("safetensors writer: tensor '" + name + "' has negative shape " + shape_str(shape));
  size_t n = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  Item item{dtype, shape, std::vector<uint8_t>(n)};
  if (n) std::memcpy(item.bytes.data(), data, n);
  tensors_.emplace(name, std::move(item));
  return {};
}

std::vector<uint8_t> SafetensorsWriter::serialize() const {
  std::vector<const std::pair<const std::string, Item>*> order;
  for (const auto& kv : tensors_) order.push_back(&kv);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_size(a->second.dtype) > dtype_size(b->second.dtype);
  });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto* kv : order) {
    const Item& it = kv->second;
    uint64_t end = offset + it.bytes.size();
    header[kv->first] = {
        {"dtype", std::string(dtype_name(it.dtype))}, {"shape", it.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  while (text.size() % 8) text.push_back(' ');
  std::vector<uint8_t> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const auto* kv : order) {
    const auto& b = kv->second.bytes;
    if (!b.empty()) std::memcpy(p, b.data(), b.size());
    p += b.size();
  }
  return out;
}

Status SafetensorsWriter::write(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error(path + ": cannot write: " + std::strerror(errno));
  size_t wrote = std::fwrite(bytes.data(), 1, bytes.size(), f);
  int close_rc = std::fclose(f);
  if (wrote != bytes.size() || close_rc != 0) {
    std::remove(tmp.c_str());
    return make_error(path + ": write failed: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return make_error(path + ": cannot rename into place: " + std::strerror(err));
  }
  return {};
}

}  // namespace tf
