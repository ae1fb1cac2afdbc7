// Qwen3.5 config (`qwen3_5`: Qwen3_5Config with a qwen3_5_text text_config and an optional
// qwen3_5_vision vision_config). HF field names; defaults are Transformers 5.17's class defaults.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "io/hf_config.h"

namespace tf::qwen3_5 {

struct VisionConfig {  // Qwen3_5VisionConfig
  int64_t depth = 27;
  int64_t hidden_size = 1152;
  int64_t num_heads = 16;
  int64_t head_dim = 72;  // hidden_size / num_heads
  int64_t intermediate_size = 4304;
  int64_t out_hidden_size = 3584;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t num_position_embeddings = 2304;
  int64_t num_grid_per_side = 48;    // sqrt(num_position_embeddings)
  ActKind act = ActKind::kGeluTanh;  // hidden_act (Qwen3_5VisionConfig's default: gelu_pytorch_tanh)
  double rope_theta = 10000.0;       // Qwen3_5VisionRotaryEmbedding's default; the model passes none
};

struct TextConfig {  // Qwen3_5TextConfig
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 256;
  int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  std::vector<bool> full_attention;  // per layer: true = full_attention, false = linear_attention
  int64_t linear_conv_kernel_dim = 4;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_num_key_heads = 16;
  int64_t linear_num_value_heads = 32;
  double rope_theta = 10000000.0;
  double partial_rotary_factor = 0.25;
  int64_t rotary_dim = 64;                           // int(head_dim * partial_rotary_factor)
  std::array<int64_t, 3> mrope_section{11, 11, 10};  // interleaved T/H/W frequency slots
  int64_t mtp_num_hidden_layers = 0;
  std::vector<int64_t> eos_token_ids;
};

struct Config {
  TextConfig text;
  bool has_vision = false;  // false: vision_config absent or null -> text only
  VisionConfig vision;
  int64_t image_token_id = 248056;
  int64_t video_token_id = 248057;
  int64_t vision_start_token_id = 248053;
  bool tie_word_embeddings = false;  // the top-level flag (Qwen3_5Config), as 5.17 ties by it
};

// Errors name the field: "config.json: vision_config.num_heads ...".
Expected<Config> parse_config(const JsonConfig& json);

}  // namespace tf::qwen3_5
