#include "models/registry.h"

#include <utility>

#include "models/lighton_ocr/model.h"
#include "models/qwen3_5/model.h"

namespace tf {
namespace {

struct Entry {
  const char* model_type;
  ModelLoader load;
};

const Entry kRegistry[] = {
    {"lighton_ocr", &lighton_ocr::load},
    {"mistral3", &lighton_ocr::load},  // LightOnOCR-1B/2-1B/3-1B as published (qwen3 text_config only)
    {"qwen3_5", &qwen3_5::load},       // Qwen3.5 / LightOnOCR-3 hybrid (Gated DeltaNet + gated attention)
};

}  // namespace

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& e : kRegistry) out.emplace_back(e.model_type);
  return out;
}

Expected<ModelLoader> find_model_loader(const JsonConfig& config) {
  TF_ASSIGN(std::string mt, config.get_string("model_type"));
  for (const auto& e : kRegistry)
    if (mt == e.model_type) return e.load;
  std::string list;
  for (const auto& e : kRegistry) list += (list.empty() ? "" : ", ") + std::string(e.model_type);
  return make_error(config.file() + ": unknown model_type '" + mt + "' (tensorfold serves: " + list + ")");
}

Expected<std::unique_ptr<Model>> load_model(const JsonConfig& config, WeightMap weights, Backend& backend) {
  TF_ASSIGN(ModelLoader loader, find_model_loader(config));
  return loader(config, std::move(weights), backend);
}

}  // namespace tf
