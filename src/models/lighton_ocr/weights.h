// LightOnOCR weights by HF name. Every tensor is checked (name, dtype, shape) and leftovers are
// refused before anything is copied to the backend. The q/k/v and gate/up projections of each layer are
// then stacked into one weight each (concat_rows: the same bits as the separate linears, fewer launches).
#pragma once
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/weight_map.h"
#include "models/lighton_ocr/config.h"

namespace tf::lighton_ocr {

struct VisionLayerWeights {
  DeviceBuffer attention_norm;  // [hidden_v]
  DeviceBuffer qkv_proj;        // [3 hidden_v, hidden_v]: q_proj | k_proj | v_proj rows
  DeviceBuffer o_proj;          // [hidden_v, hidden_v]
  DeviceBuffer ffn_norm;        // [hidden_v]
  DeviceBuffer gate_up_proj;    // [2 intermediate_v, hidden_v]: gate_proj | up_proj rows
  DeviceBuffer down_proj;       // [hidden_v, intermediate_v]
};

struct TextLayerWeights {
  DeviceBuffer input_layernorm;           // [hidden]
  DeviceBuffer qkv_proj;                  // [(heads + 2 kv_heads) head_dim, hidden]: q | k | v rows
  DeviceBuffer o_proj;                    // [hidden, heads*head_dim]
  DeviceBuffer qkv_bias, o_bias;          // empty unless attention_bias (qkv: q | k | v)
  DeviceBuffer q_norm, k_norm;            // [head_dim]
  DeviceBuffer post_attention_layernorm;  // [hidden]
  DeviceBuffer gate_up_proj;              // [2 intermediate, hidden]: gate_proj | up_proj rows
  DeviceBuffer down_proj;                 // [hidden, intermediate]
};

struct Weights {
  // Module prefixes as the checkpoint names them (also the capture names):
  // "model.vision_encoder"/"model.vision_projection" (lighton_ocr) or
  // "model.vision_tower"/"model.multi_modal_projector" (mistral3 layout).
  std::string vision_prefix, projector_prefix;
  DeviceBuffer patch_conv;  // [hidden_v, C*p*p] (the conv weight [hidden_v, C, p, p] viewed as a GEMM)
  DeviceBuffer ln_pre;      // [hidden_v]
  std::vector<VisionLayerWeights> vision_layers;
  DeviceBuffer proj_norm;      // [hidden_v]
  DeviceBuffer merging_layer;  // [hidden_v, 4*hidden_v]
  DeviceBuffer linear_1;       // [hidden, hidden_v]
  DeviceBuffer linear_1_bias;  // [hidden] or empty
  DeviceBuffer linear_2;       // [hidden, hidden]
  DeviceBuffer linear_2_bias;  // [hidden] or empty
  DeviceBuffer embed_tokens;   // [vocab, hidden]
  std::vector<TextLayerWeights> text_layers;
  DeviceBuffer norm;     // [hidden]
  DeviceBuffer lm_head;  // [vocab, hidden]; empty when tied to embed_tokens
  const Tensor& lm_head_weight() const { return lm_head.empty() ? embed_tokens.tensor() : lm_head.tensor(); }
  int64_t n_params = 0;
  size_t n_bytes = 0;
};

// act: the activation dtype (every weight must be stored in it).
Expected<Weights> load_weights(const Config& cfg, WeightMap& wm, Backend& backend, DType act);

}  // namespace tf::lighton_ocr
