// Reading the oracle's goldens (tests/golden/...): files, JSON, and a small safetensors reader.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"

namespace tf::test {

inline std::string golden_path(const std::string& rel) {
  return std::string(TF_SOURCE_DIR) + "/tests/golden/" + rel;
}

inline std::optional<std::vector<uint8_t>> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::vector<uint8_t> v((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return v;
}

inline std::optional<nlohmann::json> read_json(const std::string& path) {
  auto b = read_file_bytes(path);
  if (!b) return std::nullopt;
  return nlohmann::json::parse(b->begin(), b->end());
}

struct GoldenTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // raw little-endian, row-major
};

// The tensors of one .safetensors file, by name (no validation beyond what a trusted golden needs).
inline std::map<std::string, GoldenTensor> read_safetensors(const std::string& path) {
  std::map<std::string, GoldenTensor> out;
  auto b = read_file_bytes(path);
  if (!b || b->size() < 8) return out;
  uint64_t n = 0;
  std::memcpy(&n, b->data(), 8);
  const auto header = nlohmann::json::parse(b->begin() + 8, b->begin() + 8 + static_cast<int64_t>(n));
  const size_t base = 8 + n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    GoldenTensor t;
    t.dtype = it.value()["dtype"].get<std::string>();
    t.shape = it.value()["shape"].get<std::vector<int64_t>>();
    const auto off = it.value()["data_offsets"].get<std::vector<size_t>>();
    t.bytes.assign(b->begin() + base + off[0], b->begin() + base + off[1]);
    out[it.key()] = std::move(t);
  }
  return out;
}

// A golden tensor is either stored (small) or recorded as {sha256, shape, dtype} (large).
struct GoldenRef {
  const GoldenTensor* tensor = nullptr;
  std::string sha256;
  std::vector<int64_t> shape;
  bool found() const { return tensor != nullptr || !sha256.empty(); }
};

inline GoldenRef find_golden(const std::map<std::string, GoldenTensor>& store, const nlohmann::json& hashes,
                             const std::string& name) {
  GoldenRef r;
  if (auto it = store.find(name); it != store.end()) {
    r.tensor = &it->second;
    r.shape = it->second.shape;
  } else if (hashes.contains(name)) {
    r.sha256 = hashes[name]["sha256"].get<std::string>();
    r.shape = hashes[name]["shape"].get<std::vector<int64_t>>();
  }
  return r;
}

// Bit equality with a golden (stored bytes or hash).
inline bool equals_golden(const GoldenRef& g, const void* data, size_t nbytes) {
  if (g.tensor != nullptr)
    return g.tensor->bytes.size() == nbytes && std::memcmp(g.tensor->bytes.data(), data, nbytes) == 0;
  return !g.sha256.empty() && sha256_hex(data, nbytes) == g.sha256;
}

// For stored uint8 goldens: how many elements differ and by how much at most (diagnostics).
inline std::pair<size_t, int> u8_diff(const GoldenRef& g, const std::vector<uint8_t>& v) {
  size_t n = 0;
  int mx = 0;
  if (g.tensor == nullptr || g.tensor->bytes.size() != v.size()) return {v.size(), 255};
  for (size_t i = 0; i < v.size(); ++i) {
    const int d = std::abs(int(g.tensor->bytes[i]) - int(v[i]));
    if (d != 0) {
      ++n;
      mx = std::max(mx, d);
    }
  }
  return {n, mx};
}

}  // namespace tf::test
