// Turns an image_url into encoded image bytes without fetching anything from the network:
// data: URLs (base64, decoded strictly here) and, when allowed, file:// paths under one directory.
// The bytes are sniffed and decoded by the engine (image/), which reports bad or corrupt images.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tf {

// RFC 4648 base64 with the standard alphabet: length a multiple of 4, '=' only as final padding,
// no whitespace or URL-safe characters.
Expected<std::vector<uint8_t>> base64_decode_strict(std::string_view text);

struct MediaPolicy {
  std::string allowed_dir;  // empty: file:// refused
  int64_t max_bytes = 64 << 20;
};

// index is the image's 1-based position in the request (error messages say "image N").
Expected<std::vector<uint8_t>> load_image_url(const std::string& url, int index, const MediaPolicy& policy);

}  // namespace tf
