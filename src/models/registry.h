// model_type -> family loader. One line per model_type in registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/model.h"

namespace tf {

// Checks config and every weight (name, dtype, shape, leftovers) before allocating, then loads.
// The model keeps `weights` (its mappings back CPU weights without a copy).
using ModelLoader = Expected<std::unique_ptr<Model>> (*)(const JsonConfig& config, WeightMap weights,
                                                         Backend& backend);

// Error "unknown model_type 'X' (tensorfold serves: lighton_ocr, mistral3)" for others.
Expected<ModelLoader> find_model_loader(const JsonConfig& config);
Expected<std::unique_ptr<Model>> load_model(const JsonConfig& config, WeightMap weights, Backend& backend);
std::vector<std::string> supported_model_types();

}  // namespace tf
