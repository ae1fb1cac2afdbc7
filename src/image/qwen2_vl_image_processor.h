// Transformers 5.17's Qwen2VLImageProcessor (torchvision backend; "Qwen2VLImageProcessorFast" in
// preprocessor_config.json), used by Qwen2-VL, Qwen3-VL and Qwen3.5: smart_resize to a multiple of
// patch_size * merge_size inside [min_pixels, max_pixels], uint8 antialiased resample, rescale +
// normalize in float32, duplication to temporal_patch_size frames, and patch flattening.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "image/image.h"
#include "image/processor_common.h"
#include "tensor/tensor.h"

namespace tf {

struct Qwen2VLImageProcessorConfig {
  bool do_resize = true;
  bool do_convert_rgb = true;
  int64_t min_pixels = 56 * 56;         // size.shortest_edge (min_pixels overrides)
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge (max_pixels overrides)
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  ResizeFilter resample = ResizeFilter::bicubic;
  image_detail::NormalizeParams normalize{
      true, true, 1.0 / 255.0, {0.48145466, 0.4578275, 0.40821073}, {0.26862954, 0.26130258, 0.27577711}};

  static Expected<Qwen2VLImageProcessorConfig> from_json(const nlohmann::json& j);
};

// qwen2_vl smart_resize in Python double arithmetic (round() is round-half-even). Returns (h, w) or
// the aspect-ratio error.
Expected<std::pair<int64_t, int64_t>> qwen_smart_resize(int64_t height, int64_t width, int64_t factor,
                                                        int64_t min_pixels, int64_t max_pixels);

struct Qwen2VLProcessedImage {
  Buffer pixel_values;  // [grid_h * grid_w * grid_t, 3 * temporal_patch_size * patch * patch] f32
  int height = 0;       // after resizing
  int width = 0;
  std::array<int64_t, 3> grid_thw{};  // image_grid_thw: [1, height / patch, width / patch]
  int64_t n_image_tokens = 0;         // t * h * w / merge^2
};

class Qwen2VLImageProcessor {
 public:
  explicit Qwen2VLImageProcessor(Qwen2VLImageProcessorConfig config) : config_(std::move(config)) {}
  static Expected<Qwen2VLImageProcessor> from_json(const nlohmann::json& j);
  const Qwen2VLImageProcessorConfig& config() const { return config_; }

  Expected<std::pair<int64_t, int64_t>> target_size(int height, int width, int index_for_messages) const;
  // [3, H, W] after resizing; the size must then be a multiple of patch_size * merge_size.
  Expected<image_detail::ResizedPlanes> resize(const Image& image, int index_for_messages) const;
  Expected<Qwen2VLProcessedImage> preprocess(const Image& image, int index_for_messages) const;

 private:
  Qwen2VLImageProcessorConfig config_;
};

}  // namespace tf
