#include "models/processor.h"

#include <cstdio>

#include "base/sha256.h"
#include "models/lighton_ocr/processor.h"
#include "models/qwen3_5/processor.h"

namespace tf {

Expected<std::unique_ptr<ImageProcessor>> make_image_processor(const std::string& model_type,
                                                               const nlohmann::json& config,
                                                               const ModelInfo& info) {
  if (model_type == "lighton_ocr" || model_type == "mistral3")
    return lighton_ocr::make_processor(config, info);
  if (model_type == "qwen3_5") return qwen3_5::make_processor(config, info);
  return make_error("no image processor for model_type '" + model_type + "'");
}

std::string describe_normalize(const image_detail::NormalizeParams& n) {
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  std::string s = " rescale=" + std::string(n.do_rescale ? num(n.rescale_factor) : "off");
  if (!n.do_normalize) return s + " normalize=off";
  s += " mean=(";
  for (int i = 0; i < 3; ++i) s += (i ? "," : "") + num(n.image_mean[i]);
  s += ") std=(";
  for (int i = 0; i < 3; ++i) s += (i ? "," : "") + num(n.image_std[i]);
  return s + ")";
}

std::string image_identity(const Image& rgb, const std::string& processor_description) {
  Sha256 h;
  h.update(rgb.rgb.data(), rgb.rgb.size());
  std::string tail =
      "|" + std::to_string(rgb.width) + "x" + std::to_string(rgb.height) + "|" + processor_description;
  h.update(tail);
  return h.hex_digest();
}

}  // namespace tf
