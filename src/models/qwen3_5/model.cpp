#include "models/qwen3_5/model.h"

#include <algorithm>

#include "base/log.h"

namespace tf::qwen3_5 {

Expected<std::unique_ptr<Model>> load(const JsonConfig& config, WeightMap weights, Backend& backend) {
  TF_ASSIGN(Config cfg, parse_config(config));
  const DType act = weights.dominant_dtype();
  if (act != DType::BF16 && act != DType::F32)
    return make_error("checkpoint weights are " + std::string(dtype_name(act)) +
                      "; tensorfold serves Qwen3.5 in BF16 or F32");
  TF_ASSIGN(Weights w, load_weights(cfg, weights, backend, act));
  if (!cfg.has_vision)
    log_info(
        "--vision: qwen3_5 checkpoint has no image tower; serving text only, and image requests are refused");
  if (w.mtp.n_tensors > 0)
    log_info("qwen3_5: " + std::to_string(w.mtp.n_tensors) + " mtp.* tensors mapped (" +
             std::to_string(w.mtp.layers.size()) + " MTP layer(s)), used for MTP drafts (--drafts)");
  const TextConfig& t = cfg.text;
  ModelInfo info;
  info.family = "qwen3_5";
  info.model_type = "qwen3_5";
  info.dtype = act;
  info.vocab_size = t.vocab_size;
  info.hidden_size = t.hidden_size;
  info.n_layers = t.num_hidden_layers;
  info.n_kv_heads = t.num_key_value_heads;
  info.head_dim = t.head_dim;
  info.max_position_embeddings = t.max_position_embeddings;
  info.image_token_id = cfg.has_vision ? cfg.image_token_id : -1;
  info.patch_size = cfg.has_vision ? cfg.vision.patch_size : 0;
  info.spatial_merge_size = cfg.has_vision ? cfg.vision.spatial_merge_size : 1;
  info.eos_token_ids = t.eos_token_ids;
  info.n_params = w.n_params;
  info.weight_bytes = w.n_bytes;
  return std::unique_ptr<Model>(
      new Qwen35Model(std::move(cfg), std::move(weights), std::move(w), backend, info));
}

int64_t Qwen35Model::n_image_tokens(int64_t height, int64_t width) const {
  if (!cfg_.has_vision) return 0;
  const int64_t u = cfg_.vision.patch_size * cfg_.vision.spatial_merge_size;
  return (height / u) * (width / u);
}

std::unique_ptr<SequenceCache> Qwen35Model::new_cache(int64_t capacity) {
  const TextConfig& t = cfg_.text;
  if (!pool_) {
    const int64_t n = pool_blocks_ > 0 ? pool_blocks_
                                       : std::max<int64_t>(1024, 64 * ((capacity + kKvBlock - 1) / kKvBlock));
    pool_ =
        std::make_shared<KvPool>(backend_, info_.dtype, n_attn_layers_, t.num_key_value_heads, t.head_dim, n);
  }
  if (!states_) make_state_pool(state_slots_ > 0 ? state_slots_ : 64);
  auto c = std::make_unique<Qwen35Cache>(pool_, states_);
  c->capacity_ = capacity;
  int32_t pool_layer = 0, state_layer = 0;
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const bool full = t.full_attention[static_cast<size_t>(i)];
    c->kv_layer.push_back(full ? pool_layer++ : -1);
    c->state_layer.push_back(full ? -1 : state_layer++);
  }
  c->conv.resize(static_cast<size_t>(t.num_hidden_layers));
  c->state.resize(static_cast<size_t>(t.num_hidden_layers));
  (void)ensure_slot(*c);  // when the pool is exhausted now, reserve() or forward_step tries again
  return c;
}

bool Qwen35Model::ensure_slot(Qwen35Cache& c) {
  if (c.slot.held()) return true;
  if (!c.slot.acquire()) return false;
  for (size_t l = 0; l < c.state_layer.size(); ++l) {
    if (c.state_layer[l] < 0) continue;
    const size_t pl = static_cast<size_t>(c.state_layer[l]);
    c.conv[l] = DeviceBuffer(nullptr, states_->window(pl, c.slot.id()));
    c.state[l] = DeviceBuffer(nullptr, states_->state(pl, c.slot.id()));
  }
  return true;
}

void Qwen35Model::make_state_pool(int64_t n_slots) {
  const TextConfig& t = cfg_.text;
  const int64_t conv_dim =
      2 * t.linear_num_key_heads * t.linear_key_head_dim + t.linear_num_value_heads * t.linear_value_head_dim;
  states_ = std::make_shared<StatePool>(backend_, info_.dtype, t.num_hidden_layers - n_attn_layers_, conv_dim,
                                        t.linear_conv_kernel_dim, t.linear_num_value_heads,
                                        t.linear_key_head_dim, t.linear_value_head_dim, n_slots);
}

size_t Qwen35Model::state_slot_bytes() const {
  const TextConfig& t = cfg_.text;
  const int64_t conv_dim =
      2 * t.linear_num_key_heads * t.linear_key_head_dim + t.linear_num_value_heads * t.linear_value_head_dim;
  return StatePool::slot_bytes(info_.dtype, t.num_hidden_layers - n_attn_layers_, conv_dim,
                               t.linear_conv_kernel_dim, t.linear_num_value_heads, t.linear_key_head_dim,
                               t.linear_value_head_dim);
}

Status Qwen35Model::set_state_slots(int64_t n_slots) {
  if (states_) return make_error("the state pool is sized before the first sequence");
  if (n_slots < 1) return make_error("the state pool needs at least one slot");
  state_slots_ = n_slots;
  make_state_pool(n_slots);  // now: the engine sizes the K/V pool from the memory left after it
  return {};
}

Status Qwen35Model::set_kv_pool_blocks(int64_t n_blocks) {
  if (pool_) return make_error("the K/V pool is sized before the first sequence");
  if (n_blocks < 1) return make_error("the K/V pool needs at least one block");
  pool_blocks_ = n_blocks;
  return {};
}

size_t Qwen35Model::kv_block_bytes() const {
  return KvPool::block_bytes(info_.dtype, n_attn_layers_, cfg_.text.num_key_value_heads, cfg_.text.head_dim);
}

Model::KvPoolStats Qwen35Model::kv_pool_stats() const {
  KvPoolStats s;
  s.block_bytes = kv_block_bytes();
  s.blocks = pool_ ? pool_->n_blocks() : pool_blocks_;
  s.free = pool_ ? pool_->n_free() : pool_blocks_;
  const int64_t slots = state_slots_ > 0 ? state_slots_ : 64;
  s.state_slots = states_ ? states_->n_slots() : slots;
  s.state_slots_free = states_ ? states_->n_free() : slots;
  s.state_slot_bytes = state_slot_bytes();
  return s;
}

bool Qwen35Model::reserve(SequenceCache& cache, int64_t n_positions) {
  auto* c = dynamic_cast<Qwen35Cache*>(&cache);
  return c && ensure_slot(*c) && c->table.grow(std::min(n_positions, c->capacity()));
}

Expected<RopeIndex> rope_index(const std::vector<int32_t>& ids, int64_t image_token_id,
                               const std::vector<std::array<int64_t, 3>>& grids, int64_t m) {
  RopeIndex r;
  const size_t n = ids.size();
  r.thw.resize(3 * n);
  int64_t cur = 0, max_pos = -1;
  size_t next_grid = 0;
  for (size_t i = 0; i < n;) {
    if (ids[i] != image_token_id) {
      for (int a = 0; a < 3; ++a) r.thw[3 * i + static_cast<size_t>(a)] = static_cast<int32_t>(cur);
      max_pos = std::max(max_pos, cur);
      ++cur;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && ids[j] == image_token_id) ++j;
    // One run of image tokens may hold several images back to back only if their grids add up.
    size_t k = i;
    while (k < j) {
      if (next_grid >= grids.size())
        return make_error("rope_index: more image-token runs than images (" + std::to_string(grids.size()) +
                          ")");
      const auto [gt, gh, gw] = grids[next_grid++];
      if (gt != 1 || gh % m || gw % m) return make_error("rope_index: unsupported image grid");
      const int64_t H = gh / m, W = gw / m, cnt = H * W;
      if (static_cast<int64_t>(j - k) < cnt)
        return make_error("rope_index: an image needs " + std::to_string(cnt) +
                          " image tokens, the prompt has " + std::to_string(j - k));
      for (int64_t q = 0; q < cnt; ++q) {
        const size_t row = k + static_cast<size_t>(q);
        r.thw[3 * row] = static_cast<int32_t>(cur);
        r.thw[3 * row + 1] = static_cast<int32_t>(cur + q / W);
        r.thw[3 * row + 2] = static_cast<int32_t>(cur + q % W);
      }
      max_pos = std::max(max_pos, cur + std::max(H, W) - 1);
      cur += std::max(H, W);
      k += static_cast<size_t>(cnt);
    }
    i = j;
  }
  if (next_grid != grids.size())
    return make_error("rope_index: " + std::to_string(grids.size()) + " images but " +
                      std::to_string(next_grid) + " image-token spans");
  r.rope_delta = max_pos + 1 - static_cast<int64_t>(n);
  return r;
}

}  // namespace tf::qwen3_5

namespace tf::qwen3_5 {

Status Qwen35Model::begin_prompt(SequenceCache& cache, const std::vector<int32_t>& prompt_ids,
                                 const std::vector<std::vector<int64_t>>& image_grids) {
  std::vector<std::array<int64_t, 3>> grids;
  for (const auto& g : image_grids) {
    if (g.size() != 3) return make_error("qwen3_5: an image grid must be (t, h, w)");
    grids.push_back({g[0], g[1], g[2]});
  }
  TF_ASSIGN(RopeIndex r, rope_index(prompt_ids, info_.image_token_id, grids, cfg_.vision.spatial_merge_size));
  static_cast<Qwen35Cache&>(cache).set_rope_index(std::move(r));
  return {};
}

}  // namespace tf::qwen3_5
