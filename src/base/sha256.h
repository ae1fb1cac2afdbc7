// SHA-256 (OpenSSL libcrypto) as lowercase hex, plus the project's token hash convention.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tf {
std::string sha256_hex(const void* data, size_t n);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }
// sha256 of the comma-joined decimal ids, e.g. "1,2,3" (the `token_sha256` field everywhere).
std::string token_sha256(std::span<const int32_t> ids);

// Incremental hasher, for hashing large or scattered inputs (image identity).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex_digest();  // finalizes

 private:
  void* ctx_;
};
}  // namespace tf
