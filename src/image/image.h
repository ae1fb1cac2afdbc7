// Decoded images: RGB, row-major, interleaved, plus the limits a decoder enforces before it allocates.
// Samples are 8-bit, except 16-bit PNGs decoded as Transformers' chat path does (torchvision keeps them
// as uint16, and the processors then work on the 16-bit values).
#pragma once
#include <cstdint>
#include <vector>

namespace tf {

struct Image {
  int width = 0;
  int height = 0;
  int bit_depth = 8;            // 8: `rgb` holds the samples; 16: `rgb16` does
  std::vector<uint8_t> rgb;     // [height, width, 3] when bit_depth == 8
  std::vector<uint16_t> rgb16;  // [height, width, 3] when bit_depth == 16
};

struct ImageLimits {
  // PIL raises DecompressionBombError above 2 * Image.MAX_IMAGE_PIXELS (2 * 89478485); a server wants
  // a smaller default so one request cannot take gigabytes.
  int64_t max_pixels = 64LL * 1024 * 1024;
  int max_side = 65535;
};

// [3, H, W] planes from the interleaved samples (the CHW layout torchvision tensors have).
std::vector<uint8_t> image_to_chw(const Image& image);     // bit_depth 8
std::vector<uint16_t> image_to_chw16(const Image& image);  // bit_depth 16

}  // namespace tf
