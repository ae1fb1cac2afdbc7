// 8-bit RGB images to PNG bytes (libpng), for rendered PDF pages handed to the engine and for the
// grounding overlays `tensorfold ocr --overlay` writes.
#pragma once
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "image/image.h"

namespace tf {

// level: zlib compression 0-9. Pages sent to the engine use 1 (the bytes are decoded again a moment
// later, so speed beats size); files for people use the default 6.
Expected<std::vector<uint8_t>> encode_png(const Image& rgb, int level = 6);

}  // namespace tf
