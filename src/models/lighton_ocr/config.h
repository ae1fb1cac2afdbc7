// LightOnOCR config: `lighton_ocr` (LightOnOcrConfig) and `mistral3` (Mistral3Config) with a qwen3
// text_config and a pixtral vision_config. HF field names; defaults are HF 5.17's class defaults.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/hf_config.h"

namespace tf::lighton_ocr {

struct VisionConfig {  // PixtralVisionConfig
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t head_dim =
      0;  // always hidden_size / num_attention_heads (PixtralAttention ignores config.head_dim)
  int64_t intermediate_size = 0;
  int64_t patch_size = 0;
  int64_t image_size = 1024;
  int64_t num_channels = 3;
  double rope_theta = 10000.0;
  std::string hidden_act = "silu";
  ActKind act = ActKind::kSilu;  // hidden_act
};

struct TextConfig {  // Qwen3Config
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 40960;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool attention_bias = false;
};

struct Config {
  std::string model_type;  // "lighton_ocr" | "mistral3"
  VisionConfig vision;
  TextConfig text;
  int64_t image_token_id = 151655;
  int64_t spatial_merge_size = 2;
  bool tie_word_embeddings = true;
  bool projector_bias = false;       // mistral3: multimodal_projector_bias
  bool projector_gelu_tanh = false;  // mistral3: projector_hidden_act "gelu_pytorch_tanh"
  std::vector<int64_t> eos_token_ids;
};

// Errors name the field: "config.json: text_config.hidden_size is missing".
Expected<Config> parse_config(const JsonConfig& json);

}  // namespace tf::lighton_ocr
