#include "models/lighton_ocr/weights.h"

#include <utility>
#include <vector>

#include "models/layers/util.h"

namespace tf::lighton_ocr {
namespace {

// Phase 1 records (slot, mapped view) pairs after checking each tensor; phase 2 imports them all.
struct Plan {
  WeightMap& wm;
  DType act;
  std::vector<std::pair<DeviceBuffer*, Tensor>> items;
  int64_t n_params = 0;
  size_t n_bytes = 0;

  Status need(DeviceBuffer* slot, const std::string& name, const Shape& shape,
              const Shape* view_as = nullptr) {
    TF_ASSIGN(Tensor t, wm.get(name, act, shape));
    if (view_as) t = t.reshaped(*view_as);
    items.emplace_back(slot, t);
    n_params += t.numel();
    n_bytes += t.nbytes();
    return {};
  }
};

}  // namespace

Expected<Weights> load_weights(const Config& cfg, WeightMap& wm, Backend& backend, DType act) {
  Weights w;
  // Three name layouts: LightOnOcr modules; Mistral3 modules; and the Mistral3 layout Transformers
  // writes to disk (its conversion mapping renames model.language_model. -> language_model.model.,
  // lm_head. -> language_model.lm_head., and drops the leading "model." of the vision modules).
  std::string vfile, pfile, tp = "model.language_model.", lm_head_name = "lm_head.weight";
  if (wm.has("model.vision_tower.patch_conv.weight") && !wm.has("model.vision_encoder.patch_conv.weight")) {
    w.vision_prefix = "model.vision_tower";
    w.projector_prefix = "model.multi_modal_projector";
    vfile = w.vision_prefix, pfile = w.projector_prefix;
  } else if (wm.has("vision_tower.patch_conv.weight") && !wm.has("model.vision_encoder.patch_conv.weight")) {
    w.vision_prefix = "model.vision_tower";
    w.projector_prefix = "model.multi_modal_projector";
    vfile = "vision_tower", pfile = "multi_modal_projector";
    tp = "language_model.model.";
    lm_head_name = "language_model.lm_head.weight";
  } else {
    w.vision_prefix = "model.vision_encoder";
    w.projector_prefix = "model.vision_projection";
    vfile = w.vision_prefix, pfile = w.projector_prefix;
  }
  const VisionConfig& v = cfg.vision;
  const TextConfig& t = cfg.text;
  const int64_t hv = v.hidden_size, iv = v.intermediate_size, p = v.patch_size, C = v.num_channels;
  const int64_t h = t.hidden_size, it = t.intermediate_size, hd = t.head_dim;
  const int64_t qd = t.num_attention_heads * hd, kvd = t.num_key_value_heads * hd;
  Plan plan{wm, act, {}, 0, 0};
  // The checkpoint's separate projections, stacked into the fused weights once imported.
  struct Parts {
    DeviceBuffer q, k, v, qb, kb, vb, gate, up;
  };
  std::vector<Parts> vparts(static_cast<size_t>(v.num_hidden_layers)),
      tparts(static_cast<size_t>(t.num_hidden_layers));

  const std::string vp = vfile + ".", pp = pfile + ".";
  const Shape conv_gemm{hv, C * p * p};
  TF_TRY(plan.need(&w.patch_conv, vp + "patch_conv.weight", {hv, C, p, p}, &conv_gemm));
  TF_TRY(plan.need(&w.ln_pre, vp + "ln_pre.weight", {hv}));
  w.vision_layers.resize(static_cast<size_t>(v.num_hidden_layers));
  for (int64_t i = 0; i < v.num_hidden_layers; ++i) {
    auto& L = w.vision_layers[static_cast<size_t>(i)];
    const std::string n = vp + "transformer.layers." + std::to_string(i) + ".";
    TF_TRY(plan.need(&L.attention_norm, n + "attention_norm.weight", {hv}));
    Parts& P = vparts[static_cast<size_t>(i)];
    TF_TRY(plan.need(&P.q, n + "attention.q_proj.weight", {hv, hv}));
    TF_TRY(plan.need(&P.k, n + "attention.k_proj.weight", {hv, hv}));
    TF_TRY(plan.need(&P.v, n + "attention.v_proj.weight", {hv, hv}));
    TF_TRY(plan.need(&L.o_proj, n + "attention.o_proj.weight", {hv, hv}));
    TF_TRY(plan.need(&L.ffn_norm, n + "ffn_norm.weight", {hv}));
    TF_TRY(plan.need(&P.gate, n + "feed_forward.gate_proj.weight", {iv, hv}));
    TF_TRY(plan.need(&P.up, n + "feed_forward.up_proj.weight", {iv, hv}));
    TF_TRY(plan.need(&L.down_proj, n + "feed_forward.down_proj.weight", {hv, iv}));
  }
  TF_TRY(plan.need(&w.proj_norm, pp + "norm.weight", {hv}));
  TF_TRY(plan.need(&w.merging_layer, pp + "patch_merger.merging_layer.weight", {hv, 4 * hv}));
  TF_TRY(plan.need(&w.linear_1, pp + "linear_1.weight", {h, hv}));
  TF_TRY(plan.need(&w.linear_2, pp + "linear_2.weight", {h, h}));
  if (cfg.projector_bias) {
    TF_TRY(plan.need(&w.linear_1_bias, pp + "linear_1.bias", {h}));
    TF_TRY(plan.need(&w.linear_2_bias, pp + "linear_2.bias", {h}));
  }

  TF_TRY(plan.need(&w.embed_tokens, tp + "embed_tokens.weight", {t.vocab_size, h}));
  w.text_layers.resize(static_cast<size_t>(t.num_hidden_layers));
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    auto& L = w.text_layers[static_cast<size_t>(i)];
    const std::string n = tp + "layers." + std::to_string(i) + ".";
    TF_TRY(plan.need(&L.input_layernorm, n + "input_layernorm.weight", {h}));
    Parts& P = tparts[static_cast<size_t>(i)];
    TF_TRY(plan.need(&P.q, n + "self_attn.q_proj.weight", {qd, h}));
    TF_TRY(plan.need(&P.k, n + "self_attn.k_proj.weight", {kvd, h}));
    TF_TRY(plan.need(&P.v, n + "self_attn.v_proj.weight", {kvd, h}));
    TF_TRY(plan.need(&L.o_proj, n + "self_attn.o_proj.weight", {h, qd}));
    if (t.attention_bias) {
      TF_TRY(plan.need(&P.qb, n + "self_attn.q_proj.bias", {qd}));
      TF_TRY(plan.need(&P.kb, n + "self_attn.k_proj.bias", {kvd}));
      TF_TRY(plan.need(&P.vb, n + "self_attn.v_proj.bias", {kvd}));
      TF_TRY(plan.need(&L.o_bias, n + "self_attn.o_proj.bias", {h}));
    }
    TF_TRY(plan.need(&L.q_norm, n + "self_attn.q_norm.weight", {hd}));
    TF_TRY(plan.need(&L.k_norm, n + "self_attn.k_norm.weight", {hd}));
    TF_TRY(plan.need(&L.post_attention_layernorm, n + "post_attention_layernorm.weight", {h}));
    TF_TRY(plan.need(&P.gate, n + "mlp.gate_proj.weight", {it, h}));
    TF_TRY(plan.need(&P.up, n + "mlp.up_proj.weight", {it, h}));
    TF_TRY(plan.need(&L.down_proj, n + "mlp.down_proj.weight", {h, it}));
  }
  TF_TRY(plan.need(&w.norm, tp + "norm.weight", {h}));
  if (!cfg.tie_word_embeddings) {
    TF_TRY(plan.need(&w.lm_head, lm_head_name, {t.vocab_size, h}));
  } else if (wm.has(lm_head_name)) {
    // Tied: Transformers points lm_head at embed_tokens; a stored copy must still be well formed.
    TF_ASSIGN(Tensor unused, wm.get(lm_head_name, act, {t.vocab_size, h}));
    (void)unused;
  }
  TF_TRY(wm.check_all_used({}));

  for (auto& [slot, tensor] : plan.items) *slot = backend.import_host(tensor);
  for (size_t i = 0; i < vparts.size(); ++i) {
    const Parts& P = vparts[i];
    w.vision_layers[i].qkv_proj = concat_rows(backend, {&P.q, &P.k, &P.v});
    w.vision_layers[i].gate_up_proj = concat_rows(backend, {&P.gate, &P.up});
  }
  for (size_t i = 0; i < tparts.size(); ++i) {
    const Parts& P = tparts[i];
    TextLayerWeights& L = w.text_layers[i];
    L.qkv_proj = concat_rows(backend, {&P.q, &P.k, &P.v});
    if (!P.qb.empty()) L.qkv_bias = concat_rows(backend, {&P.qb, &P.kb, &P.vb});
    L.gate_up_proj = concat_rows(backend, {&P.gate, &P.up});
  }
  w.n_params = plan.n_params;
  w.n_bytes = plan.n_bytes;
  return w;
}

}  // namespace tf::lighton_ocr
