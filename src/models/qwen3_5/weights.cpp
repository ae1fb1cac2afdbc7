#include "models/qwen3_5/weights.h"

#include <utility>

#include "base/log.h"
#include "models/layers/util.h"

namespace tf::qwen3_5 {
namespace {

// Phase 1 records (slot, mapped view) pairs after checking each tensor; phase 2 imports them all.
struct Plan {
  WeightMap& wm;
  DType act;
  std::vector<std::pair<DeviceBuffer*, Tensor>> items;
  std::vector<Buffer> converted;
  int64_t n_params = 0;
  size_t n_bytes = 0;

  Status need(DeviceBuffer* slot, const std::string& name, const Shape& shape,
              const Shape* view_as = nullptr) {
    TF_ASSIGN(Tensor t, wm.get_any(name, {DType::BF16, DType::F32}, shape));
    if (t.dtype != act) {
      Buffer b(act, shape);
      for (int64_t i = 0; i < t.numel(); ++i) store_f32(b.view(), i, load_f32(t, i));
      t = b.view();
      converted.push_back(std::move(b));
    }
    if (view_as) t = t.reshaped(*view_as);
    items.emplace_back(slot, t);
    n_params += t.numel();
    n_bytes += t.nbytes();
    return {};
  }
  // Maps the tensor when it exists with this shape; otherwise leaves the slot empty.
  bool maybe(DeviceBuffer* slot, const std::string& name, const Shape& shape) {
    const TensorInfo* ti = wm.info(name);
    if (!ti || ti->shape != shape || (ti->dtype != DType::BF16 && ti->dtype != DType::F32)) return false;
    return need(slot, name, shape).ok();
  }
};

Status plan_layer(Plan& p, const TextConfig& t, bool full, const std::string& n, LayerWeights& L) {
  const int64_t h = t.hidden_size, it = t.intermediate_size, D = t.head_dim;
  L.full_attention = full;
  TF_TRY(p.need(&L.input_layernorm, n + "input_layernorm.weight", {h}));
  TF_TRY(p.need(&L.post_attention_layernorm, n + "post_attention_layernorm.weight", {h}));
  if (full) {
    const int64_t qd = t.num_attention_heads * D, kvd = t.num_key_value_heads * D;
    FullAttnWeights& A = L.attn;
    TF_TRY(p.need(&A.q_proj, n + "self_attn.q_proj.weight", {2 * qd, h}));
    TF_TRY(p.need(&A.k_proj, n + "self_attn.k_proj.weight", {kvd, h}));
    TF_TRY(p.need(&A.v_proj, n + "self_attn.v_proj.weight", {kvd, h}));
    TF_TRY(p.need(&A.o_proj, n + "self_attn.o_proj.weight", {h, qd}));
    TF_TRY(p.need(&A.q_norm, n + "self_attn.q_norm.weight", {D}));
    TF_TRY(p.need(&A.k_norm, n + "self_attn.k_norm.weight", {D}));
  } else {
    const int64_t kd = t.linear_num_key_heads * t.linear_key_head_dim;
    const int64_t vd = t.linear_num_value_heads * t.linear_value_head_dim, hv = t.linear_num_value_heads;
    const int64_t conv_dim = 2 * kd + vd, K = t.linear_conv_kernel_dim;
    LinearAttnWeights& G = L.linear;
    const std::string a = n + "linear_attn.";
    TF_TRY(p.need(&G.in_proj_qkv, a + "in_proj_qkv.weight", {conv_dim, h}));
    TF_TRY(p.need(&G.in_proj_z, a + "in_proj_z.weight", {vd, h}));
    TF_TRY(p.need(&G.in_proj_b, a + "in_proj_b.weight", {hv, h}));
    TF_TRY(p.need(&G.in_proj_a, a + "in_proj_a.weight", {hv, h}));
    const Shape conv_view{conv_dim, K};
    TF_TRY(p.need(&G.conv1d, a + "conv1d.weight", {conv_dim, 1, K}, &conv_view));
    TF_TRY(p.need(&G.A_log, a + "A_log", {hv}));
    TF_TRY(p.need(&G.dt_bias, a + "dt_bias", {hv}));
    TF_TRY(p.need(&G.norm, a + "norm.weight", {t.linear_value_head_dim}));
    TF_TRY(p.need(&G.out_proj, a + "out_proj.weight", {h, vd}));
  }
  TF_TRY(p.need(&L.mlp.gate_proj, n + "mlp.gate_proj.weight", {it, h}));
  TF_TRY(p.need(&L.mlp.up_proj, n + "mlp.up_proj.weight", {it, h}));
  TF_TRY(p.need(&L.mlp.down_proj, n + "mlp.down_proj.weight", {h, it}));
  return {};
}

Status plan_vision(Plan& p, const VisionConfig& v, VisionWeights& w) {
  const int64_t hv = v.hidden_size, iv = v.intermediate_size,
                m2 = v.spatial_merge_size * v.spatial_merge_size;
  const int64_t cols = v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size;
  const std::string vp = "model.visual.";
  const Shape gemm{hv, cols};
  TF_TRY(p.need(&w.patch_w, vp + "patch_embed.proj.weight",
                {hv, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}, &gemm));
  TF_TRY(p.need(&w.patch_b, vp + "patch_embed.proj.bias", {hv}));
  TF_TRY(p.need(&w.pos_embed, vp + "pos_embed.weight", {v.num_position_embeddings, hv}));
  w.blocks.resize(static_cast<size_t>(v.depth));
  for (int64_t i = 0; i < v.depth; ++i) {
    auto& B = w.blocks[static_cast<size_t>(i)];
    const std::string n = vp + "blocks." + std::to_string(i) + ".";
    TF_TRY(p.need(&B.norm1_w, n + "norm1.weight", {hv}));
    TF_TRY(p.need(&B.norm1_b, n + "norm1.bias", {hv}));
    TF_TRY(p.need(&B.norm2_w, n + "norm2.weight", {hv}));
    TF_TRY(p.need(&B.norm2_b, n + "norm2.bias", {hv}));
    TF_TRY(p.need(&B.qkv_w, n + "attn.qkv.weight", {3 * hv, hv}));
    TF_TRY(p.need(&B.qkv_b, n + "attn.qkv.bias", {3 * hv}));
    TF_TRY(p.need(&B.proj_w, n + "attn.proj.weight", {hv, hv}));
    TF_TRY(p.need(&B.proj_b, n + "attn.proj.bias", {hv}));
    TF_TRY(p.need(&B.fc1_w, n + "mlp.linear_fc1.weight", {iv, hv}));
    TF_TRY(p.need(&B.fc1_b, n + "mlp.linear_fc1.bias", {iv}));
    TF_TRY(p.need(&B.fc2_w, n + "mlp.linear_fc2.weight", {hv, iv}));
    TF_TRY(p.need(&B.fc2_b, n + "mlp.linear_fc2.bias", {hv}));
  }
  TF_TRY(p.need(&w.merger_norm_w, vp + "merger.norm.weight", {hv}));
  TF_TRY(p.need(&w.merger_norm_b, vp + "merger.norm.bias", {hv}));
  TF_TRY(p.need(&w.merger_fc1_w, vp + "merger.linear_fc1.weight", {m2 * hv, m2 * hv}));
  TF_TRY(p.need(&w.merger_fc1_b, vp + "merger.linear_fc1.bias", {m2 * hv}));
  TF_TRY(p.need(&w.merger_fc2_w, vp + "merger.linear_fc2.weight", {v.out_hidden_size, m2 * hv}));
  TF_TRY(p.need(&w.merger_fc2_b, vp + "merger.linear_fc2.bias", {v.out_hidden_size}));
  return {};
}

void plan_mtp(Plan& p, const TextConfig& t, MtpWeights& m) {
  const int64_t h = t.hidden_size, it = t.intermediate_size, D = t.head_dim;
  const int64_t qd = t.num_attention_heads * D, kvd = t.num_key_value_heads * D;
  m.present = p.maybe(&m.fc, "mtp.fc.weight", {h, 2 * h});
  p.maybe(&m.pre_fc_norm_embedding, "mtp.pre_fc_norm_embedding.weight", {h});
  p.maybe(&m.pre_fc_norm_hidden, "mtp.pre_fc_norm_hidden.weight", {h});
  p.maybe(&m.norm, "mtp.norm.weight", {h});
  // Sized first: the plan keeps pointers to these slots.
  m.layers.resize(static_cast<size_t>(std::max<int64_t>(t.mtp_num_hidden_layers, 0)));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerWeights& L = m.layers[i];
    L.full_attention = true;
    const std::string n = "mtp.layers." + std::to_string(i) + ".";
    p.maybe(&L.input_layernorm, n + "input_layernorm.weight", {h});
    p.maybe(&L.post_attention_layernorm, n + "post_attention_layernorm.weight", {h});
    p.maybe(&L.attn.q_proj, n + "self_attn.q_proj.weight", {2 * qd, h});
    p.maybe(&L.attn.k_proj, n + "self_attn.k_proj.weight", {kvd, h});
    p.maybe(&L.attn.v_proj, n + "self_attn.v_proj.weight", {kvd, h});
    p.maybe(&L.attn.o_proj, n + "self_attn.o_proj.weight", {h, qd});
    p.maybe(&L.attn.q_norm, n + "self_attn.q_norm.weight", {D});
    p.maybe(&L.attn.k_norm, n + "self_attn.k_norm.weight", {D});
    p.maybe(&L.mlp.gate_proj, n + "mlp.gate_proj.weight", {it, h});
    p.maybe(&L.mlp.up_proj, n + "mlp.up_proj.weight", {it, h});
    p.maybe(&L.mlp.down_proj, n + "mlp.down_proj.weight", {h, it});
  }
}

}  // namespace

Expected<Weights> load_weights(const Config& cfg, WeightMap& wm, Backend& backend, DType act) {
  Weights w;
  const TextConfig& t = cfg.text;
  Plan plan{wm, act, {}, {}, 0, 0};
  if (cfg.has_vision) TF_TRY(plan_vision(plan, cfg.vision, w.vision));
  const std::string tp = "model.language_model.";
  TF_TRY(plan.need(&w.embed_tokens, tp + "embed_tokens.weight", {t.vocab_size, t.hidden_size}));
  w.layers.resize(static_cast<size_t>(t.num_hidden_layers));
  for (int64_t i = 0; i < t.num_hidden_layers; ++i)
    TF_TRY(plan_layer(plan, t, t.full_attention[static_cast<size_t>(i)],
                      tp + "layers." + std::to_string(i) + ".", w.layers[static_cast<size_t>(i)]));
  TF_TRY(plan.need(&w.norm, tp + "norm.weight", {t.hidden_size}));
  if (!cfg.tie_word_embeddings) {
    TF_TRY(plan.need(&w.lm_head, "lm_head.weight", {t.vocab_size, t.hidden_size}));
  } else if (wm.has("lm_head.weight")) {
    // Tied: Transformers points lm_head at embed_tokens; a stored copy must still be well formed.
    TF_ASSIGN(Tensor unused,
              wm.get_any("lm_head.weight", {DType::BF16, DType::F32}, {t.vocab_size, t.hidden_size}));
    (void)unused;
  }
  const int64_t before_mtp = plan.n_params;
  const size_t items_before = plan.items.size();
  plan_mtp(plan, t, w.mtp);
  w.mtp.n_tensors = static_cast<int64_t>(plan.items.size() - items_before);
  std::vector<std::pair<std::string, std::string>> allowed{
      {"mtp.",
       "multi-token-prediction weights not in the mapped layout (kept for the drafter, unused here)"}};
  if (!cfg.has_vision)
    allowed.emplace_back("model.visual.", "config.json has no vision_config: serving text only");
  TF_TRY(wm.check_all_used(allowed));

  for (auto& [slot, tensor] : plan.items) *slot = backend.import_host(tensor);
  // One linear for gate and up (models/layers/decoder.h gated_mlp); the MTP layer's where it has both.
  auto stack_mlp = [&](MlpWeights& m) {
    if (m.gate_proj.empty() || m.up_proj.empty()) return;
    m.gate_up_proj = concat_rows(backend, {&m.gate_proj, &m.up_proj});
    m.gate_proj = DeviceBuffer();
    m.up_proj = DeviceBuffer();
  };
  for (LayerWeights& L : w.layers) stack_mlp(L.mlp);
  for (LayerWeights& L : w.mtp.layers) stack_mlp(L.mlp);
  w.converted = std::move(plan.converted);
  w.n_params = before_mtp;  // the served model's parameters (HF's count drops mtp.*)
  w.n_bytes = plan.n_bytes;
  return w;
}

}  // namespace tf::qwen3_5
