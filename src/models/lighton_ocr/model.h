// LightOnOCR-1B family (LightOnOcrForConditionalGeneration / the published mistral3 checkpoints):
// Pixtral vision tower -> RMSNorm + 2×2 patch merger + Linear-GELU-Linear projector -> Qwen3
// decoder. vision.cpp and text.cpp hold the two halves.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <utility>

#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/layers/kv_pool.h"
#include "models/layers/step_rows.h"
#include "models/lighton_ocr/config.h"
#include "models/lighton_ocr/weights.h"
#include "models/model.h"

namespace tf::lighton_ocr {

// Per-sequence K/V: a block table into the model's paged pool (every decoder layer's k and v of
// [n_blocks * kKvBlock, num_key_value_heads, head_dim]).
class KvCache final : public SequenceCache {
 public:
  explicit KvCache(std::shared_ptr<KvPool> pool, int64_t capacity)
      : capacity_(capacity), table(std::move(pool)) {}
  int64_t capacity() const override { return capacity_; }
  int64_t capacity_ = 0;
  BlockTable table;
};

class LightOnOcrModel final : public Model {
 public:
  LightOnOcrModel(Config cfg, WeightMap wm, Weights w, Backend& backend, ModelInfo info)
      : cfg_(std::move(cfg)),
        wm_(std::move(wm)),
        w_(std::move(w)),
        backend_(backend),
        info_(std::move(info)) {}
  const ModelInfo& info() const override { return info_; }
  Backend& backend() override { return backend_; }
  int64_t n_image_tokens(int64_t height, int64_t width) const override;
  Expected<DeviceBuffer> encode_images(const std::vector<ImageInput>& images) override;
  std::unique_ptr<SequenceCache> new_cache(int64_t capacity) override;
  Status set_kv_pool_blocks(int64_t n_blocks) override;
  size_t kv_block_bytes() const override;
  KvPoolStats kv_pool_stats() const override;
  bool reserve(SequenceCache& cache, int64_t n_positions) override;
  Expected<Buffer> forward_step(std::span<const Segment> segments, StepOutput out) override;
  void set_capture(CaptureFn fn) override { capture_ = std::move(fn); }
  // cache_blocks.cpp: the pool blocks holding rows [begin, end) (begin a multiple of kKvBlock),
  // shared with the prompt cache; restore appends them to a fresh cache's table (copy-on-write
  // when the cache later writes into a shared block).
  Expected<CacheBlock> snapshot(SequenceCache& cache, int64_t begin, int64_t end) override;
  Status restore(SequenceCache& cache, const std::vector<const CacheBlock*>& blocks) override;
  // Pure attention: every row is computed alone already, and K/V beyond a position are never read
  // before they are rewritten, so rolling back only checks the bound.
  Status rollback(SequenceCache& cache, int64_t n_positions) override;
  const Config& config() const { return cfg_; }

 private:
  // text.cpp: the decoder over one step's rows. Inputs on the device: ids[n] I32, angles[n, head_dim/2]
  // F32 (RoPE), ranges[n, 2], slots[n], seg_rows[n_seg + 1], tables[n_seg, width] (paged_attention), and
  // where the step mixes few-row and longer segments the cut between them (kv_pool.h paged_attention_cut).
  struct TextInputs {
    Tensor ids, angles, ranges, slots, seg_rows, tables;
    PagedCut cut = {};
  };
  // Activations of n rows (attn [n, heads, head_dim]; xn ends as the final norm's output).
  struct TextScratch {
    DeviceBuffer h, cos, sin, xn, qkv, q, attn, o, gu, mid;
  };
  // The recorded decode steps of B one-row segments: the bucket's activations and logits, and per block
  // table width its input arena and graphs (greedy: with the argmax; sampled: with the sample op; logits:
  // neither). Widths share the bucket's buffers, so sequences of different capacities cost one set of
  // activations per bucket.
  struct DecodeGraph {
    TextScratch s;
    DeviceBuffer lg, lf, am, sampled;
    struct Recorded {
      DeviceBuffer in;
      std::unique_ptr<Backend::Graph> greedy, sampled, logits;
    };
    std::map<int64_t, Recorded> by_width;
  };
  TextScratch text_scratch(int64_t n);
  const std::vector<float>& text_inv_freq();  // RoPE inverse frequencies, computed once
  void text_stack(const TextInputs& in, const TextScratch& s, const StepRows* rows,
                  std::span<const Segment> segs);
  Expected<Buffer> decode_graph_step(const StepRows& rows, const PagedStep& paged, int64_t width,
                                     StepOutput out);

  // vision.cpp
  DeviceBuffer vision_tower(const std::vector<ImageInput>& images,
                            const std::vector<std::pair<int64_t, int64_t>>& grids);
  DeviceBuffer projector(const Tensor& feats, const std::vector<std::pair<int64_t, int64_t>>& grids);

  Config cfg_;
  WeightMap wm_;  // keeps the mapped weights alive (CPU weights alias them)
  Weights w_;
  Backend& backend_;
  ModelInfo info_;
  CaptureFn capture_;
  std::shared_ptr<KvPool> pool_;  // made by set_kv_pool_blocks or the first new_cache
  int64_t pool_blocks_ = 0;
  std::vector<float> inv_freq_;
  std::map<int64_t, std::unique_ptr<DecodeGraph>> graphs_;  // by bucket rows B
};

// Registry entry for "lighton_ocr" and "mistral3".
Expected<std::unique_ptr<Model>> load(const JsonConfig& config, WeightMap weights, Backend& backend);

}  // namespace tf::lighton_ocr
