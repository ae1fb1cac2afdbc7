#include "image/qwen2_vl_image_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace tf {

using namespace image_detail;

Expected<Qwen2VLImageProcessorConfig> Qwen2VLImageProcessorConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"preprocessor_config.json: expected a JSON object"};
  TF_TRY(check_processor_type(j, "Qwen2VL"));
  Qwen2VLImageProcessorConfig c;
  TF_TRY(get_bool(j, "do_resize", &c.do_resize));
  TF_TRY(get_bool(j, "do_convert_rgb", &c.do_convert_rgb));
  if (j.contains("size") && !j["size"].is_null()) {
    const auto& s = j["size"];
    if (!s.is_object()) return Error{"preprocessor_config.json: size must be an object, got " + s.dump()};
    TF_TRY(get_positive_int(s, "shortest_edge", &c.min_pixels));
    TF_TRY(get_positive_int(s, "longest_edge", &c.max_pixels));
  }
  // HF: explicit min_pixels / max_pixels override size (backward compatibility).
  TF_TRY(get_positive_int(j, "min_pixels", &c.min_pixels));
  TF_TRY(get_positive_int(j, "max_pixels", &c.max_pixels));
  if (c.min_pixels > c.max_pixels)
    return Error{"preprocessor_config.json: min_pixels (" + std::to_string(c.min_pixels) +
                 ") is larger than max_pixels (" + std::to_string(c.max_pixels) + ")"};
  TF_TRY(get_positive_int(j, "patch_size", &c.patch_size));
  TF_TRY(get_positive_int(j, "temporal_patch_size", &c.temporal_patch_size));
  TF_TRY(get_positive_int(j, "merge_size", &c.merge_size));
  TF_TRY(get_resample(j, "resample", &c.resample));
  TF_TRY(read_normalize_params(j, &c.normalize));
  return c;
}

Expected<Qwen2VLImageProcessor> Qwen2VLImageProcessor::from_json(const nlohmann::json& j) {
  TF_ASSIGN(auto c, Qwen2VLImageProcessorConfig::from_json(j));
  return Qwen2VLImageProcessor(std::move(c));
}

Expected<std::pair<int64_t, int64_t>> qwen_smart_resize(int64_t height, int64_t width, int64_t factor,
                                                        int64_t min_pixels, int64_t max_pixels) {
  const double h = static_cast<double>(height), w = static_cast<double>(width),
               f = static_cast<double>(factor);
  const double aspect = std::max(h, w) / std::min(h, w);
  if (aspect > 200) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", aspect);
    return Error{"aspect ratio " + std::string(buf) + " (" + std::to_string(width) + "x" +
                 std::to_string(height) + ") is over the limit of 200"};
  }
  // Python's round() on a float: nearest, ties to even (nearbyint in the default rounding mode).
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(h / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(w / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt((h * w) / static_cast<double>(max_pixels));
    h_bar = std::max(factor, static_cast<int64_t>(std::floor(h / beta / f)) * factor);
    w_bar = std::max(factor, static_cast<int64_t>(std::floor(w / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = static_cast<int64_t>(std::ceil(h * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(w * beta / f)) * factor;
  }
  return std::pair<int64_t, int64_t>{h_bar, w_bar};
}

Expected<std::pair<int64_t, int64_t>> Qwen2VLImageProcessor::target_size(int height, int width,
                                                                         int index) const {
  auto r = qwen_smart_resize(height, width, config_.patch_size * config_.merge_size, config_.min_pixels,
                             config_.max_pixels);
  if (!r.ok()) return Error{"image " + std::to_string(index) + " has an " + r.error().message};
  return r;
}

Expected<ResizedPlanes> Qwen2VLImageProcessor::resize(const Image& image, int index) const {
  int h = image.height, w = image.width;
  if (config_.do_resize) {
    TF_ASSIGN(const auto target, target_size(h, w, index));
    h = static_cast<int>(target.first);
    w = static_cast<int>(target.second);
  }
  const int64_t unit = config_.patch_size * config_.merge_size;
  if (h % unit != 0 || w % unit != 0)
    return Error{"image " + std::to_string(index) + " is " + std::to_string(w) + "x" + std::to_string(h) +
                 " after preprocessing, not a multiple of patch_size * merge_size = " + std::to_string(unit)};
  return resize_planes(image, h, w, config_.resample);
}

Expected<Qwen2VLProcessedImage> Qwen2VLImageProcessor::preprocess(const Image& image, int index) const {
  Qwen2VLProcessedImage out;
  TF_ASSIGN(const ResizedPlanes planes, resize(image, index));
  out.height = planes.height;
  out.width = planes.width;
  const int64_t H = out.height, W = out.width, plane = H * W;
  std::vector<float> norm(static_cast<size_t>(3 * plane));  // [3, H, W]
  rescale_normalize(planes, norm.data(), config_.normalize);

  const int64_t P = config_.patch_size, T = config_.temporal_patch_size, M = config_.merge_size;
  const int64_t gh = H / P, gw = W / P;
  const int64_t row_len = 3 * T * P * P;
  out.grid_thw = {1, gh, gw};
  out.n_image_tokens = gh * gw / (M * M);
  out.pixel_values = Buffer(DType::F32, {gh * gw, row_len});  // [gh * gw, 3 * T * P * P]
  float* dst = out.pixel_values.as<float>();
  // Rows in (block_row, block_col, in_row, in_col) order; each row is [c][t][y][x], every frame a copy
  // of the single image (HF repeats the last frame up to temporal_patch_size).
  for (int64_t br = 0; br < gh / M; ++br) {
    for (int64_t bc = 0; bc < gw / M; ++bc) {
      for (int64_t ir = 0; ir < M; ++ir) {
        for (int64_t ic = 0; ic < M; ++ic) {
          const int64_t py = br * M + ir, px = bc * M + ic;
          for (int64_t c = 0; c < 3; ++c) {
            for (int64_t t = 0; t < T; ++t) {
              for (int64_t y = 0; y < P; ++y) {
                const float* src = &norm[static_cast<size_t>(c * plane + (py * P + y) * W + px * P)];
                std::copy(src, src + P, dst);
                dst += P;
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tf
