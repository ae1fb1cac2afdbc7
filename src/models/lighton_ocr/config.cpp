#include "models/lighton_ocr/config.h"

#include <nlohmann/json.hpp>

#include "models/layers/activation.h"

namespace tf::lighton_ocr {
namespace {

// rope_parameters (v5) or the legacy rope_theta / rope_scaling keys; only the default rope type.
// A 5.17 re-save writes "axial" for the Pixtral vision rope (PixtralVisionRotaryEmbedding); published
// configs say "default". Both mean the same 2D table there.
Expected<double> parse_rope_theta(const JsonConfig& c, double fallback, bool vision = false) {
  TF_ASSIGN(auto rp, c.object_if("rope_parameters"));
  if (rp) {
    TF_ASSIGN(std::string type, rp->get_string("rope_type", "default"));
    if (type != "default" && !(vision && type == "axial"))
      return rp->error("rope_type", "is '" + type + "'; tensorfold supports only the default RoPE here");
    if (rp->has("rope_theta")) return rp->get_number("rope_theta");
  }
  TF_ASSIGN(auto rs, c.object_if("rope_scaling"));
  if (rs) {
    TF_ASSIGN(std::string type, rs->get_string("rope_type", rs->has("type") ? "" : "default"));
    if (type.empty()) {
      TF_ASSIGN(type, rs->get_string("type"));
    }
    if (type != "default")
      return rs->error("rope_type", "is '" + type + "'; tensorfold supports only the default RoPE here");
  }
  return c.get_number("rope_theta", fallback);
}

Expected<VisionConfig> parse_vision(const JsonConfig& v) {
  VisionConfig out;
  TF_ASSIGN(out.hidden_size, v.get_positive_int("hidden_size"));
  TF_ASSIGN(out.num_hidden_layers, v.get_positive_int("num_hidden_layers"));
  TF_ASSIGN(out.num_attention_heads, v.get_positive_int("num_attention_heads"));
  TF_ASSIGN(out.intermediate_size, v.get_positive_int("intermediate_size"));
  TF_ASSIGN(out.patch_size, v.get_positive_int("patch_size"));
  TF_ASSIGN(out.image_size, v.get_positive_int("image_size", 1024));
  TF_ASSIGN(out.num_channels, v.get_positive_int("num_channels", 3));
  // PixtralVisionConfig's default hidden_act is "gelu"; every LightOnOCR checkpoint says "silu".
  // PixtralMLP is gated with any ACT2FN entry: down(act(gate(x)) * up(x)).
  TF_ASSIGN(out.hidden_act, v.get_string("hidden_act", "gelu"));
  auto kind = act_kind_from_hf(out.hidden_act);
  if (!kind)
    return v.error("hidden_act",
                   "is '" + out.hidden_act + "'; the gated Pixtral MLP here supports " + kAdmittedActs);
  out.act = *kind;
  if (out.hidden_size % out.num_attention_heads != 0)
    return v.error("hidden_size", "must be a multiple of num_attention_heads");
  out.head_dim = out.hidden_size / out.num_attention_heads;
  if (out.head_dim % 4 != 0)
    return v.error("hidden_size", "/ num_attention_heads must be a multiple of 4 (2D RoPE)");
  TF_ASSIGN(out.rope_theta, parse_rope_theta(v, 10000.0, true));
  return out;
}

Expected<TextConfig> parse_text(const JsonConfig& t) {
  TextConfig out;
  TF_ASSIGN(out.vocab_size, t.get_positive_int("vocab_size"));
  TF_ASSIGN(out.hidden_size, t.get_positive_int("hidden_size"));
  TF_ASSIGN(out.intermediate_size, t.get_positive_int("intermediate_size"));
  TF_ASSIGN(out.num_hidden_layers, t.get_positive_int("num_hidden_layers"));
  TF_ASSIGN(out.num_attention_heads, t.get_positive_int("num_attention_heads"));
  TF_ASSIGN(out.num_key_value_heads, t.get_positive_int("num_key_value_heads", out.num_attention_heads));
  TF_ASSIGN(out.head_dim, t.get_positive_int("head_dim", 128));  // Qwen3Config default
  TF_ASSIGN(out.max_position_embeddings, t.get_positive_int("max_position_embeddings", 40960));
  TF_ASSIGN(out.rms_norm_eps, t.get_number("rms_norm_eps", 1e-6));
  TF_ASSIGN(out.attention_bias, t.get_bool("attention_bias", false));
  TF_ASSIGN(out.rope_theta, parse_rope_theta(t, 10000.0));
  TF_ASSIGN(std::string act, t.get_string("hidden_act", "silu"));
  if (act != "silu")
    return t.error("hidden_act", "is '" + act + "'; the Qwen3 decoder here supports silu only");
  if (out.num_attention_heads % out.num_key_value_heads != 0)
    return t.error("num_attention_heads", "must be a multiple of num_key_value_heads");
  if (out.head_dim % 2 != 0) return t.error("head_dim", "must be even (RoPE)");
  TF_ASSIGN(bool sliding, t.get_bool("use_sliding_window", false));
  if (sliding) return t.error("use_sliding_window", "is true; tensorfold serves full-attention Qwen3 only");
  TF_ASSIGN(auto layer_types, t.get_string_list("layer_types", {}));
  for (const auto& lt : layer_types)
    if (lt != "full_attention")
      return t.error("layer_types", "contains '" + lt + "'; only full_attention is supported");
  return out;
}

}  // namespace

Expected<Config> parse_config(const JsonConfig& json) {
  Config c;
  TF_ASSIGN(c.model_type, json.get_string("model_type"));
  if (c.model_type != "lighton_ocr" && c.model_type != "mistral3")
    return json.error("model_type", "is '" + c.model_type + "', not lighton_ocr or mistral3");
  TF_ASSIGN(JsonConfig tj, json.object("text_config"));
  TF_ASSIGN(JsonConfig vj, json.object("vision_config"));
  // A mistral3 config without sub-config model types defaults to mistral + pixtral in HF.
  TF_ASSIGN(std::string text_type,
            tj.get_string("model_type", c.model_type == "mistral3" ? "mistral" : "qwen3"));
  TF_ASSIGN(std::string vision_type, vj.get_string("model_type", "pixtral"));
  if (text_type != "qwen3") {
    if (c.model_type == "mistral3")
      return make_error("this mistral3 checkpoint is not a LightOnOCR model (text_config.model_type is " +
                        text_type + "); tensorfold serves mistral3 with a qwen3 decoder only");
    return tj.error("model_type", "is '" + text_type + "'; LightOnOCR has a qwen3 decoder");
  }
  if (vision_type != "pixtral") {
    if (c.model_type == "mistral3")
      return make_error("this mistral3 checkpoint is not a LightOnOCR model (vision_config.model_type is " +
                        vision_type + "); tensorfold serves mistral3 with a pixtral vision tower only");
    return vj.error("model_type", "is '" + vision_type + "'; LightOnOCR has a pixtral vision tower");
  }
  TF_ASSIGN(c.text, parse_text(tj));
  TF_ASSIGN(c.vision, parse_vision(vj));
  TF_ASSIGN(c.spatial_merge_size, json.get_positive_int("spatial_merge_size", 2));
  if (c.spatial_merge_size != 2) return json.error("spatial_merge_size", "must be 2 (the 2×2 patch merger)");
  if (c.model_type == "lighton_ocr") {
    TF_ASSIGN(c.image_token_id, json.get_int("image_token_id", json.has("image_token_index") ? -1 : 151655));
    if (c.image_token_id < 0) {
      TF_ASSIGN(c.image_token_id, json.get_int("image_token_index"));
    }
  } else {
    // Mistral3Config: image_token_index (default 10), with image_token_id as an attribute alias.
    if (json.has("image_token_id")) {
      TF_ASSIGN(c.image_token_id, json.get_int("image_token_id"));
    } else {
      TF_ASSIGN(c.image_token_id, json.get_int("image_token_index", 10));
    }
    TF_ASSIGN(c.projector_bias, json.get_bool("multimodal_projector_bias", false));
    TF_ASSIGN(std::string act, json.get_string("projector_hidden_act", "gelu"));
    if (act == "gelu_pytorch_tanh") {
      c.projector_gelu_tanh = true;
    } else if (act != "gelu") {
      return json.error("projector_hidden_act", "is '" + act + "'; supported: gelu, gelu_pytorch_tanh");
    }
    if (json.has("vision_feature_layer")) {
      const auto& vfl = json.json().at("vision_feature_layer");
      const bool last =
          (vfl.is_number_integer() && vfl.get<int64_t>() == -1) ||
          (vfl.is_array() && vfl.size() == 1 && vfl[0].is_number_integer() && vfl[0].get<int64_t>() == -1);
      if (!last)
        return json.error("vision_feature_layer", "must be -1 (the last vision layer) for LightOnOCR");
    }
  }
  if (c.image_token_id < 0 || c.image_token_id >= c.text.vocab_size)
    return json.error(json.has("image_token_id") ? "image_token_id" : "image_token_index",
                      "is outside the vocabulary (" + std::to_string(c.text.vocab_size) + ")");
  // Transformers ties by the text config's flag when present (get_text_config()), else the top level.
  TF_ASSIGN(bool top_tie, json.get_bool("tie_word_embeddings", true));
  TF_ASSIGN(c.tie_word_embeddings, tj.get_bool("tie_word_embeddings", top_tie));
  TF_ASSIGN(c.eos_token_ids, json.get_ids("eos_token_id", {}));
  if (c.eos_token_ids.empty()) {
    TF_ASSIGN(c.eos_token_ids, tj.get_ids("eos_token_id", {}));
  }
  return c;
}

}  // namespace tf::lighton_ocr
