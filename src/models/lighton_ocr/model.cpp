#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

Expected<std::unique_ptr<Model>> load(const JsonConfig& config, WeightMap weights, Backend& backend) {
  TF_ASSIGN(Config cfg, parse_config(config));
  const DType act = weights.dominant_dtype();
  if (act != DType::BF16 && act != DType::F32)
    return make_error("checkpoint weights are " + std::string(dtype_name(act)) +
                      "; tensorfold serves LightOnOCR in BF16 or F32");
  TF_ASSIGN(Weights w, load_weights(cfg, weights, backend, act));
  ModelInfo info;
  info.family = "lighton_ocr";
  info.model_type = cfg.model_type;
  info.dtype = act;
  info.vocab_size = cfg.text.vocab_size;
  info.hidden_size = cfg.text.hidden_size;
  info.n_layers = cfg.text.num_hidden_layers;
  info.n_kv_heads = cfg.text.num_key_value_heads;
  info.head_dim = cfg.text.head_dim;
  info.max_position_embeddings = cfg.text.max_position_embeddings;
  info.image_token_id = cfg.image_token_id;
  info.patch_size = cfg.vision.patch_size;
  info.spatial_merge_size = cfg.spatial_merge_size;
  info.eos_token_ids = cfg.eos_token_ids;
  info.n_params = w.n_params;
  info.weight_bytes = w.n_bytes;
  return std::unique_ptr<Model>(
      new LightOnOcrModel(std::move(cfg), std::move(weights), std::move(w), backend, info));
}

int64_t LightOnOcrModel::n_image_tokens(int64_t height, int64_t width) const {
  const int64_t p = cfg_.vision.patch_size * cfg_.spatial_merge_size;
  return (height / p) * (width / p);
}

std::unique_ptr<SequenceCache> LightOnOcrModel::new_cache(int64_t capacity) {
  if (!pool_) {
    const int64_t n = pool_blocks_ > 0 ? pool_blocks_
                                       : std::max<int64_t>(1024, 64 * ((capacity + kKvBlock - 1) / kKvBlock));
    pool_ = std::make_shared<KvPool>(backend_, info_.dtype, cfg_.text.num_hidden_layers,
                                     cfg_.text.num_key_value_heads, cfg_.text.head_dim, n);
  }
  return std::make_unique<KvCache>(pool_, capacity);
}

Status LightOnOcrModel::set_kv_pool_blocks(int64_t n_blocks) {
  if (pool_) return make_error("the K/V pool is sized before the first sequence");
  if (n_blocks < 1) return make_error("the K/V pool needs at least one block");
  pool_blocks_ = n_blocks;
  return {};
}

size_t LightOnOcrModel::kv_block_bytes() const {
  return KvPool::block_bytes(info_.dtype, cfg_.text.num_hidden_layers, cfg_.text.num_key_value_heads,
                             cfg_.text.head_dim);
}

Model::KvPoolStats LightOnOcrModel::kv_pool_stats() const {
  KvPoolStats s;
  s.block_bytes = kv_block_bytes();
  if (pool_) {
    s.blocks = pool_->n_blocks();
    s.free = pool_->n_free();
  } else {
    s.blocks = pool_blocks_;
    s.free = pool_blocks_;
  }
  return s;
}

bool LightOnOcrModel::reserve(SequenceCache& cache, int64_t n_positions) {
  auto* c = dynamic_cast<KvCache*>(&cache);
  return c && c->table.grow(std::min(n_positions, c->capacity()));
}

Status LightOnOcrModel::rollback(SequenceCache& cache, int64_t n_positions) {
  if (!dynamic_cast<KvCache*>(&cache)) return make_error("rollback: the cache was not made by this model");
  if (n_positions < 1 || n_positions > cache.capacity())
    return make_error("rollback: " + std::to_string(n_positions) +
                      " positions do not fit the cache (capacity " + std::to_string(cache.capacity()) + ")");
  return {};
}

}  // namespace tf::lighton_ocr
