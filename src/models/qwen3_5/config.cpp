#include "models/qwen3_5/config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "models/layers/activation.h"

namespace tf::qwen3_5 {
namespace {

Expected<VisionConfig> parse_vision(const JsonConfig& v) {
  VisionConfig o;
  TF_ASSIGN(std::string type, v.get_string("model_type", "qwen3_5_vision"));
  if (type != "qwen3_5_vision")
    return v.error("model_type", "is '" + type + "'; tensorfold reads only the qwen3_5_vision tower here");
  TF_ASSIGN(o.depth, v.get_positive_int("depth", o.depth));
  TF_ASSIGN(o.hidden_size, v.get_positive_int("hidden_size", o.hidden_size));
  TF_ASSIGN(o.num_heads, v.get_positive_int("num_heads", o.num_heads));
  TF_ASSIGN(o.intermediate_size, v.get_positive_int("intermediate_size", o.intermediate_size));
  TF_ASSIGN(o.out_hidden_size, v.get_positive_int("out_hidden_size", o.out_hidden_size));
  TF_ASSIGN(o.in_channels, v.get_positive_int("in_channels", o.in_channels));
  TF_ASSIGN(o.patch_size, v.get_positive_int("patch_size", o.patch_size));
  TF_ASSIGN(o.temporal_patch_size, v.get_positive_int("temporal_patch_size", o.temporal_patch_size));
  TF_ASSIGN(o.spatial_merge_size, v.get_positive_int("spatial_merge_size", o.spatial_merge_size));
  TF_ASSIGN(o.num_position_embeddings,
            v.get_positive_int("num_position_embeddings", o.num_position_embeddings));
  TF_ASSIGN(std::string act, v.get_string("hidden_act", "gelu_pytorch_tanh"));
  auto kind = act_kind_from_hf(act);
  if (!kind) return v.error("hidden_act", "is '" + act + "'; the vision MLP here supports " + kAdmittedActs);
  o.act = *kind;
  if (o.in_channels != 3)
    return v.error("in_channels", "is " + std::to_string(o.in_channels) + "; images are RGB (3)");
  if (o.hidden_size % o.num_heads != 0)
    return v.error("num_heads", "(" + std::to_string(o.num_heads) + ") does not divide hidden_size " +
                                    std::to_string(o.hidden_size) + "; cannot read this vision tower");
  o.head_dim = o.hidden_size / o.num_heads;
  if (o.head_dim % 4 != 0)
    return v.error("hidden_size",
                   "/ num_heads = " + std::to_string(o.head_dim) +
                       " is not a multiple of 4, which the 2D vision rotary needs; cannot read this "
                       "vision tower");
  const auto side =
      static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(o.num_position_embeddings))));
  if (side * side != o.num_position_embeddings || side < 2)
    return v.error("num_position_embeddings",
                   "(" + std::to_string(o.num_position_embeddings) +
                       ") is not a square grid of at least 2x2; cannot read this vision "
                       "tower's position table");
  o.num_grid_per_side = side;
  if (v.has("deepstack_visual_indexes")) {
    TF_ASSIGN(auto ds, v.get_int_list("deepstack_visual_indexes"));
    if (!ds.empty())
      return v.error("deepstack_visual_indexes", "is not empty; Qwen3.5 towers have no deepstack");
  }
  return o;
}

Expected<TextConfig> parse_text(const JsonConfig& t) {
  TextConfig o;
  TF_ASSIGN(std::string type, t.get_string("model_type", "qwen3_5_text"));
  if (type != "qwen3_5_text") return t.error("model_type", "is '" + type + "', not qwen3_5_text");
  TF_ASSIGN(o.vocab_size, t.get_positive_int("vocab_size"));
  TF_ASSIGN(o.hidden_size, t.get_positive_int("hidden_size"));
  TF_ASSIGN(o.intermediate_size, t.get_positive_int("intermediate_size"));
  TF_ASSIGN(o.num_hidden_layers, t.get_positive_int("num_hidden_layers"));
  TF_ASSIGN(o.num_attention_heads, t.get_positive_int("num_attention_heads"));
  TF_ASSIGN(o.num_key_value_heads, t.get_positive_int("num_key_value_heads", 4));
  TF_ASSIGN(o.head_dim, t.get_positive_int("head_dim", 256));
  TF_ASSIGN(o.max_position_embeddings, t.get_positive_int("max_position_embeddings", 32768));
  TF_ASSIGN(o.rms_norm_eps, t.get_number("rms_norm_eps", 1e-6));
  TF_ASSIGN(o.linear_conv_kernel_dim, t.get_positive_int("linear_conv_kernel_dim", 4));
  TF_ASSIGN(o.linear_key_head_dim, t.get_positive_int("linear_key_head_dim", 128));
  TF_ASSIGN(o.linear_value_head_dim, t.get_positive_int("linear_value_head_dim", 128));
  TF_ASSIGN(o.linear_num_key_heads, t.get_positive_int("linear_num_key_heads", 16));
  TF_ASSIGN(o.linear_num_value_heads, t.get_positive_int("linear_num_value_heads", 32));
  TF_ASSIGN(o.mtp_num_hidden_layers, t.get_int("mtp_num_hidden_layers", 0));
  TF_ASSIGN(o.eos_token_ids, t.get_ids("eos_token_id", {}));
  TF_ASSIGN(std::string act, t.get_string("hidden_act", "silu"));
  if (act != "silu")
    return t.error("hidden_act", "is '" + act + "'; the Qwen3.5 decoder here supports silu only");
  TF_ASSIGN(bool bias, t.get_bool("attention_bias", false));
  if (bias) return t.error("attention_bias", "is true; Qwen3.5 attention has no biases");
  if (o.num_attention_heads % o.num_key_value_heads != 0)
    return t.error("num_attention_heads", "must be a multiple of num_key_value_heads");
  if (o.linear_num_value_heads % o.linear_num_key_heads != 0)
    return t.error("linear_num_value_heads", "must be a multiple of linear_num_key_heads");

  // layer_types, or every full_attention_interval-th layer full (configuration_qwen3_5.py).
  TF_ASSIGN(auto types, t.get_string_list("layer_types", {}));
  if (types.empty()) {
    TF_ASSIGN(int64_t interval, t.get_positive_int("full_attention_interval", 4));
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) o.full_attention.push_back((i + 1) % interval == 0);
  } else {
    if (static_cast<int64_t>(types.size()) != o.num_hidden_layers)
      return t.error("layer_types", "has " + std::to_string(types.size()) + " entries for " +
                                        std::to_string(o.num_hidden_layers) + " layers");
    for (const auto& lt : types) {
      if (lt != "full_attention" && lt != "linear_attention")
        return t.error("layer_types", "contains '" + lt + "'; expected full_attention or linear_attention");
      o.full_attention.push_back(lt == "full_attention");
    }
  }

  // rope_parameters (v5) with the legacy top-level keys as fallbacks.
  TF_ASSIGN(o.partial_rotary_factor, t.get_number("partial_rotary_factor", 0.25));
  TF_ASSIGN(o.rope_theta, t.get_number("rope_theta", o.rope_theta));
  std::vector<int64_t> sec{11, 11, 10};
  TF_ASSIGN(auto rp, t.object_if("rope_parameters"));
  if (!rp) {
    TF_ASSIGN(rp, t.object_if("rope_scaling"));
  }
  if (rp) {
    TF_ASSIGN(std::string rt, rp->get_string("rope_type", "default"));
    if (rt != "default")
      return rp->error("rope_type", "is '" + rt + "'; tensorfold supports the default M-RoPE only");
    TF_ASSIGN(o.rope_theta, rp->get_number("rope_theta", o.rope_theta));
    TF_ASSIGN(o.partial_rotary_factor, rp->get_number("partial_rotary_factor", o.partial_rotary_factor));
    TF_ASSIGN(sec, rp->get_int_list("mrope_section", sec));
  }
  o.rotary_dim = static_cast<int64_t>(static_cast<double>(o.head_dim) * o.partial_rotary_factor);
  if (o.rotary_dim <= 0 || o.rotary_dim % 2 != 0 || o.rotary_dim > o.head_dim)
    return t.error("partial_rotary_factor", "gives a rotary dim of " + std::to_string(o.rotary_dim) +
                                                " for head_dim " + std::to_string(o.head_dim) +
                                                "; it must be even and positive");
  if (sec.size() != 3) return t.error("rope_parameters.mrope_section", "must have 3 entries (T, H, W)");
  for (int i = 0; i < 3; ++i) o.mrope_section[static_cast<size_t>(i)] = sec[static_cast<size_t>(i)];
  if (sec[0] < 0 || sec[1] < 0 || sec[2] < 0)
    return t.error("rope_parameters.mrope_section", "must not be negative");
  return o;
}

}  // namespace

Expected<Config> parse_config(const JsonConfig& json) {
  Config c;
  TF_ASSIGN(std::string mt, json.get_string("model_type"));
  if (mt != "qwen3_5") return json.error("model_type", "is '" + mt + "', not qwen3_5");
  TF_ASSIGN(JsonConfig tj, json.object("text_config"));
  TF_ASSIGN(c.text, parse_text(tj));
  TF_ASSIGN(auto vj, json.object_if("vision_config"));
  c.has_vision = vj.has_value();
  if (vj) {
    TF_ASSIGN(c.vision, parse_vision(*vj));
  }
  TF_ASSIGN(c.image_token_id, json.get_int("image_token_id", c.image_token_id));
  TF_ASSIGN(c.video_token_id, json.get_int("video_token_id", c.video_token_id));
  TF_ASSIGN(c.vision_start_token_id, json.get_int("vision_start_token_id", c.vision_start_token_id));
  if (c.has_vision && (c.image_token_id < 0 || c.image_token_id >= c.text.vocab_size))
    return json.error("image_token_id",
                      "is outside the vocabulary (" + std::to_string(c.text.vocab_size) + ")");
  TF_ASSIGN(c.tie_word_embeddings, json.get_bool("tie_word_embeddings", false));
  if (c.text.eos_token_ids.empty()) {
    TF_ASSIGN(c.text.eos_token_ids, json.get_ids("eos_token_id", {}));
  }
  return c;
}

}  // namespace tf::qwen3_5
