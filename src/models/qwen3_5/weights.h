// Qwen3.5 weights by HF name. Every tensor is checked (name, dtype, shape) and leftovers are
// refused before anything is handed to the backend; mtp.* tensors are mapped for drafting and
// never refused; model.visual.* is allowed unused only for a text-only config.
#pragma once
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/weight_map.h"
#include "models/qwen3_5/config.h"

namespace tf::qwen3_5 {

struct VisionBlockWeights {
  DeviceBuffer norm1_w, norm1_b, norm2_w, norm2_b;  // [hidden_v]
  DeviceBuffer qkv_w;                               // [3*hidden_v, hidden_v]
  DeviceBuffer qkv_b;                               // [3*hidden_v]
  DeviceBuffer proj_w, proj_b;                      // [hidden_v, hidden_v], [hidden_v]
  DeviceBuffer fc1_w, fc1_b;                        // [inter_v, hidden_v], [inter_v]
  DeviceBuffer fc2_w, fc2_b;                        // [hidden_v, inter_v], [hidden_v]
};

struct VisionWeights {
  DeviceBuffer patch_w;    // [hidden_v, C*T*p*p] (Conv3d weight [hidden_v, C, T, p, p] as a GEMM)
  DeviceBuffer patch_b;    // [hidden_v]
  DeviceBuffer pos_embed;  // [num_position_embeddings, hidden_v]
  std::vector<VisionBlockWeights> blocks;
  DeviceBuffer merger_norm_w, merger_norm_b;  // [hidden_v]
  DeviceBuffer merger_fc1_w, merger_fc1_b;    // [m²*hidden_v, m²*hidden_v], [m²*hidden_v]
  DeviceBuffer merger_fc2_w, merger_fc2_b;    // [out_hidden, m²*hidden_v], [out_hidden]
};

struct LinearAttnWeights {   // Qwen3_5GatedDeltaNet
  DeviceBuffer in_proj_qkv;  // [2*Hk*Dk + Hv*Dv, hidden]
  DeviceBuffer in_proj_z;    // [Hv*Dv, hidden]
  DeviceBuffer in_proj_b;    // [Hv, hidden]
  DeviceBuffer in_proj_a;    // [Hv, hidden]
  DeviceBuffer conv1d;       // [conv_dim, K] (stored [conv_dim, 1, K])
  DeviceBuffer A_log;        // [Hv]
  DeviceBuffer dt_bias;      // [Hv]
  DeviceBuffer norm;         // [Dv]
  DeviceBuffer out_proj;     // [hidden, Hv*Dv]
};

struct FullAttnWeights {        // Qwen3_5Attention
  DeviceBuffer q_proj;          // [Hq*D*2, hidden], per head [query | gate]
  DeviceBuffer k_proj, v_proj;  // [Hkv*D, hidden]
  DeviceBuffer o_proj;          // [hidden, Hq*D]
  DeviceBuffer q_norm, k_norm;  // [D]
};

struct MlpWeights {
  DeviceBuffer gate_proj, up_proj;  // [inter, hidden] as loaded; empty once stacked into gate_up_proj
  DeviceBuffer gate_up_proj;        // [2 inter, hidden]: gate_proj's rows, then up_proj's
  DeviceBuffer down_proj;           // [hidden, inter]
};

struct LayerWeights {
  bool full_attention = false;
  DeviceBuffer input_layernorm, post_attention_layernorm;  // [hidden], applied as (1 + w)
  LinearAttnWeights linear;                                // when !full_attention
  FullAttnWeights attn;                                    // when full_attention
  MlpWeights mlp;
};

// The multi-token-prediction head (vLLM qwen3_5_mtp layout), mapped for the drafts issue. Slots
// whose tensor is absent or differently shaped stay empty; `present` says whether fc was found.
struct MtpWeights {
  bool present = false;
  DeviceBuffer fc;                                               // [hidden, 2*hidden]
  DeviceBuffer pre_fc_norm_embedding, pre_fc_norm_hidden, norm;  // [hidden]
  std::vector<LayerWeights> layers;                              // full-attention decoder layers
  int64_t n_tensors = 0;                                         // mtp.* tensors mapped
};

struct Weights {
  VisionWeights vision;       // empty without vision_config
  DeviceBuffer embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  DeviceBuffer norm;     // [hidden]
  DeviceBuffer lm_head;  // [vocab, hidden]; empty when tied
  MtpWeights mtp;
  std::vector<Buffer> converted;  // tensors stored in another float dtype, rounded to act (owned)
  const Tensor& lm_head_weight() const { return lm_head.empty() ? embed_tokens.tensor() : lm_head.tensor(); }
  int64_t n_params = 0;
  size_t n_bytes = 0;
};

// act: the activation dtype. Tensors stored in the other float dtype are converted to act (HF
// loads every parameter in the model dtype).
Expected<Weights> load_weights(const Config& cfg, WeightMap& wm, Backend& backend, DType act);

}  // namespace tf::qwen3_5
