#include "image/pixtral_image_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tf {

using namespace image_detail;

Expected<PixtralImageProcessorConfig> PixtralImageProcessorConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"preprocessor_config.json: expected a JSON object"};
  TF_TRY(check_processor_type(j, "Pixtral"));
  PixtralImageProcessorConfig c;
  TF_TRY(get_bool(j, "do_resize", &c.do_resize));
  TF_TRY(get_bool(j, "do_convert_rgb", &c.do_convert_rgb));
  if (j.contains("size") && !j["size"].is_null()) {
    const auto& s = j["size"];
    if (s.is_object() && s.contains("longest_edge")) {
      int64_t e = 0;
      TF_TRY(get_positive_int(s, "longest_edge", &e));
      if (e == 0) return Error{"preprocessor_config.json: size.longest_edge must be a positive integer"};
      c.max_height = c.max_width = e;
    } else if (s.is_object() && s.contains("height") && s.contains("width")) {
      TF_TRY(get_int_or_hw(j, "size", &c.max_height, &c.max_width));
    } else {
      return Error{
          "preprocessor_config.json: size must be {\"longest_edge\": n} or {\"height\": h, \"width\": w}, "
          "got " +
          s.dump()};
    }
  }
  TF_TRY(get_int_or_hw(j, "patch_size", &c.patch_height, &c.patch_width));
  TF_TRY(get_resample(j, "resample", &c.resample));
  TF_TRY(read_normalize_params(j, &c.normalize));
  return c;
}

Expected<PixtralImageProcessor> PixtralImageProcessor::from_json(const nlohmann::json& j) {
  TF_ASSIGN(auto c, PixtralImageProcessorConfig::from_json(j));
  return PixtralImageProcessor(std::move(c));
}

std::pair<int, int> PixtralImageProcessor::target_size(int height, int width) const {
  int64_t h = height, w = width;
  const double ratio = std::max(static_cast<double>(h) / static_cast<double>(config_.max_height),
                                static_cast<double>(w) / static_cast<double>(config_.max_width));
  if (ratio > 1) {
    h = static_cast<int64_t>(std::floor(static_cast<double>(h) / ratio));
    w = static_cast<int64_t>(std::floor(static_cast<double>(w) / ratio));
  }
  // (n - 1) // p + 1 with Python's floor division: for n = 0 that is 0 (floor(-1 / p) = -1).
  auto up = [](int64_t n, int64_t p) {
    const int64_t q = n >= 1 ? (n - 1) / p : -1;
    return (q + 1) * p;
  };
  return {static_cast<int>(up(h, config_.patch_height)), static_cast<int>(up(w, config_.patch_width))};
}

Expected<ResizedPlanes> PixtralImageProcessor::resize(const Image& image, int index) const {
  int h = image.height, w = image.width;
  if (config_.do_resize) {
    const auto [th, tw] = target_size(h, w);
    if (th <= 0 || tw <= 0)
      return Error{"image " + std::to_string(index) + " is " + std::to_string(w) + "x" + std::to_string(h) +
                   ", too thin to resize (a side would become 0 pixels)"};
    h = th;
    w = tw;
  }
  return resize_planes(image, h, w, config_.resample);
}

Expected<PixtralProcessedImage> PixtralImageProcessor::preprocess(const Image& image, int index) const {
  PixtralProcessedImage out;
  TF_ASSIGN(const ResizedPlanes planes, resize(image, index));
  out.height = planes.height;
  out.width = planes.width;
  out.pixel_values = Buffer(DType::F32, {3, out.height, out.width});  // [3, H, W]
  rescale_normalize(planes, out.pixel_values.as<float>(), config_.normalize);
  return out;
}

int64_t PixtralImageProcessor::n_image_tokens(int height, int width, int spatial_merge_size) const {
  const int64_t eh = config_.patch_height * spatial_merge_size, ew = config_.patch_width * spatial_merge_size;
  return (height / eh) * (width / ew);
}

}  // namespace tf
