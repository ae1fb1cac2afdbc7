// A safetensors file: 8-byte little-endian header length N, N bytes of JSON header, then the data
// section. The header is validated strictly before anything is handed out, so every entry's bytes
// lie inside the file, match dtype x shape, and overlap no other entry.
//
// The file is mapped read-only (PROT_READ, MAP_PRIVATE): weights are never written, and an
// accidental write faults instead of reaching the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace tf {

// `s` with control characters written as \xNN, so a message quoting names from a file stays one line.
std::string one_line(std::string_view s);

// Header bigger than this is refused (the reference Rust implementation uses the same bound).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the start of the data section
  uint64_t end = 0;
  // Start of the bytes inside the mapping. Not necessarily aligned to the element size: the
  // format requires no alignment (WeightMap copies misaligned tensors to aligned memory).
  const uint8_t* data = nullptr;
  size_t nbytes() const { return static_cast<size_t>(end - begin); }
};

class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  // Maps the file and validates its header. Errors are one line starting with the file name.
  static Expected<SafetensorsFile> open(const std::string& path);
  // Validates bytes the caller owns; they must outlive the result. `label` names the file in errors.
  static Expected<SafetensorsFile> from_memory(const void* data, size_t size, std::string label = "<memory>");
  // Same, taking ownership of the bytes.
  static Expected<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, std::string label = "<memory>");

  const std::string& path() const { return path_; }    // as given to open() (or the label)
  const std::string& label() const { return label_; }  // file name used in messages
  const std::vector<SafetensorsEntry>& tensors() const { return entries_; }  // sorted by name
  const SafetensorsEntry* find(std::string_view name) const;                 // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t file_size() const { return size_; }
  size_t header_size() const { return header_size_; }  // N, the JSON part
  size_t data_size() const { return size_ >= 8 + header_size_ ? size_ - 8 - header_size_ : 0; }

 private:
  static Expected<SafetensorsFile> parse(std::shared_ptr<const void> owner, const uint8_t* bytes, size_t size,
                                         std::string path, std::string label);
  std::shared_ptr<const void> owner_;  // keeps the mapping / bytes alive; null for from_memory
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  size_t header_size_ = 0;
  std::string path_;
  std::string label_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace tf
