// Transformers 5.17's PixtralImageProcessor (torchvision backend, the default for
// "PixtralImageProcessorFast"), as LightOnOCR uses it: resize so the image fits size.longest_edge
// (never upscaling), round each side up to a multiple of the patch size, resample with the uint8
// antialiased kernel, then rescale + normalize in float32.
#pragma once
#include <cstdint>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "image/image.h"
#include "image/processor_common.h"
#include "tensor/tensor.h"

namespace tf {

struct PixtralImageProcessorConfig {
  bool do_resize = true;
  bool do_convert_rgb = true;                   // decode_image already yields RGB; kept for the report
  int64_t max_height = 1024, max_width = 1024;  // size.longest_edge, or size.height / size.width
  int64_t patch_height = 16, patch_width = 16;  // patch_size
  ResizeFilter resample = ResizeFilter::bicubic;
  image_detail::NormalizeParams normalize{
      true, true, 1.0 / 255.0, {0.48145466, 0.4578275, 0.40821073}, {0.26862954, 0.26130258, 0.27577711}};

  // Missing fields keep HF's defaults (above); present ones are validated.
  static Expected<PixtralImageProcessorConfig> from_json(const nlohmann::json& j);
};

struct PixtralProcessedImage {
  Buffer pixel_values;  // [3, height, width] f32
  int height = 0;       // image_size, after resizing
  int width = 0;
};

class PixtralImageProcessor {
 public:
  explicit PixtralImageProcessor(PixtralImageProcessorConfig config) : config_(std::move(config)) {}
  static Expected<PixtralImageProcessor> from_json(const nlohmann::json& j);
  const PixtralImageProcessorConfig& config() const { return config_; }

  // get_resize_output_image_size: ratio = max(h / max_h, w / max_w) in double; if ratio > 1 each side
  // becomes floor(side / ratio); then rounded up to the patch multiple. Returns (height, width).
  std::pair<int, int> target_size(int height, int width) const;

  // [3, H, W] after resizing (the tensor torchvision hands to normalize). An image so thin that a
  // side would round to 0 pixels is refused, as HF's resize fails on it.
  Expected<image_detail::ResizedPlanes> resize(const Image& image, int index_for_messages) const;
  Expected<PixtralProcessedImage> preprocess(const Image& image, int index_for_messages) const;

  // LightOnOCR's placeholder count: (H // (patch * merge)) * (W // (patch * merge)).
  int64_t n_image_tokens(int height, int width, int spatial_merge_size) const;

 private:
  PixtralImageProcessorConfig config_;
};

}  // namespace tf
