// The family's multimodal processor, as Transformers' processor classes do it: one decoded RGB
// image -> pixel values and the number of placeholder tokens the prompt carries for it.
// (Text and template handling are shared: runtime/prompt.)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "image/image.h"
#include "image/processor_common.h"
#include "io/hf_config.h"
#include "models/model.h"
#include "tensor/tensor.h"

namespace tf {

struct ProcessedImage {
  Buffer pixel_values;            // family layout, host F32 (Pixtral: [3, H, W]; Qwen: [n_patches, C*T*P*P])
  int64_t height = 0, width = 0;  // processed size in pixels
  std::vector<int64_t> grid_thw;  // Qwen-VL: {t, h/patch, w/patch}; empty for Pixtral
  int64_t n_tokens = 0;           // placeholder tokens in the prompt
  std::string identity;           // SHA-256 of the decoded RGB pixels + size + processor settings

  ImageInput as_input() const { return ImageInput{pixel_values.view(), height, width}; }
};

class ImageProcessor {
 public:
  virtual ~ImageProcessor() = default;
  // Errors are user-facing and name the image ("image 2 is too small: ...").
  virtual Expected<ProcessedImage> process(const Image& rgb, int index_for_messages) const = 0;
  // The token the chat template emits once per image and the processor expands n_tokens times.
  virtual const std::string& placeholder() const = 0;
  // Processor settings in one line (for image identity and `inspect`).
  virtual std::string describe() const = 0;
};

// Builds the processor for a model_type from the checkpoint's resolved image-processor config.
Expected<std::unique_ptr<ImageProcessor>> make_image_processor(const std::string& model_type,
                                                               const nlohmann::json& image_processor_config,
                                                               const ModelInfo& info);

// " rescale=… mean=(…) std=(…)" with every digit (%.17g), for processor descriptions: two settings
// that differ anywhere must never describe alike (descriptions are part of the image identity).
std::string describe_normalize(const image_detail::NormalizeParams& n);

// SHA-256 over the RGB bytes, the size and the processor description.
std::string image_identity(const Image& rgb, const std::string& processor_description);

}  // namespace tf
