#include "base/sha256.h"

#include <openssl/evp.h>

#include "base/status.h"

namespace tf {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  TF_CHECK(ctx_ != nullptr);
  TF_CHECK(EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) == 1);
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::update(const void* data, size_t n) {
  TF_CHECK(EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n) == 1);
}
std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  TF_CHECK(EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) == 1);
  static const char* hexd = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hexd[md[i] >> 4]);
    out.push_back(hexd[md[i] & 15]);
  }
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 h;
  h.update(data, n);
  return h.hex_digest();
}

std::string token_sha256(std::span<const int32_t> ids) {
  std::string s;
  s.reserve(ids.size() * 7);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s.push_back(',');
    s += std::to_string(ids[i]);
  }
  return sha256_hex(s);
}
}  // namespace tf
