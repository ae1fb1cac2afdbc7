// Qwen3VLProcessor as Qwen3.5 uses it (Transformers 5.17): Qwen2-VL image processor (smart_resize,
// temporal duplication, merge-block patch order) and `<|image_pad|>` repeated t*h*w/merge^2 times
// inside the template's <|vision_start|>…<|vision_end|>.
#pragma once
#include <memory>

#include "models/processor.h"

namespace tf::qwen3_5 {
Expected<std::unique_ptr<ImageProcessor>> make_processor(const nlohmann::json& image_processor_config,
                                                         const ModelInfo& info);
}
