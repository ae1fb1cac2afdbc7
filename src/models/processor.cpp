#include "models/processor.h"

#include "base/sha256.h"
#include "models/lighton_ocr/processor.h"
#include "models/qwen3_5/processor.h"

namespace tf {

Expected<std::unique_ptr<ImageProcessor>> make_image_processor(const std::string& model_type,
                                                               const nlohmann::json& config,
                                                               const ModelInfo& info) {
  if (model_type == "lighton_ocr" || model_type == "mistral3") return lighton_ocr::make_processor(config, info);
  if (model_type == "qwen3_5") return qwen3_5::make_processor(config, info);
  return make_error("no image processor for model_type '" + model_type + "'");
}

std::string image_identity(const Image& rgb, const std::string& processor_description) {
  Sha256 h;
  h.update(rgb.rgb.data(), rgb.rgb.size());
  std::string tail = "|" + std::to_string(rgb.width) + "x" + std::to_string(rgb.height) + "|" + processor_description;
  h.update(tail);
  return h.hex_digest();
}

}  // namespace tf
