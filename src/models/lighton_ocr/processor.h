// LightOnOcrProcessor (Transformers 5.17): Pixtral image processor with the checkpoint's patch size
// (14 for LightOnOCR; HF does not pass patch * merge), and `<|image_pad|>` repeated
// (H // (patch * merge)) * (W // (patch * merge)) times, with no break or end tokens.
#pragma once
#include <memory>

#include "models/processor.h"

namespace tf::lighton_ocr {
Expected<std::unique_ptr<ImageProcessor>> make_processor(const nlohmann::json& image_processor_config,
                                                         const ModelInfo& info);
}
