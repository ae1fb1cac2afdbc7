// The interface the runtime sees for every model family. A family implements it in its own folder
// and registers one line in registry.cpp. Models compute through a Backend& only.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace tf {

struct ModelInfo {
  std::string family;         // "lighton_ocr"
  std::string model_type;     // config.json's model_type ("lighton_ocr" or "mistral3")
  DType dtype = DType::BF16;  // activation dtype = the checkpoint's dtype
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // decoder hidden size (rows of image embeddings have this width)
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  int64_t image_token_id = -1;
  int64_t patch_size = 0;              // vision patch size in pixels
  int64_t spatial_merge_size = 1;      // image tokens per side = patches per side / this
  std::vector<int64_t> eos_token_ids;  // from config.json (generation_config.json is the runtime's)
  int64_t n_params = 0;
  size_t weight_bytes = 0;
};

// One image as the family's processor produced it: pixel_values[C, H, W] f32 on the host, where
// (height, width) is the processed size (multiples of patch_size). The tensor may be larger
// (batch padding at the bottom/right); only the top-left height×width pixels are read.
struct ImageInput {
  Tensor pixel_values;  // [C, H_padded, W_padded] F32, host
  int64_t height = 0;
  int64_t width = 0;
};

// Per-sequence decoder state (K/V rows for every layer; recurrent state for hybrid families).
class SequenceCache {
 public:
  virtual ~SequenceCache() = default;
  virtual int64_t capacity() const = 0;  // positions [0, capacity) can be written
};

// Blocks of a paged K/V pool (models/layers/kv_pool.h) that a prompt-cache block shares with the
// sequences that wrote or restored them; the references go when this goes.
struct SharedBlocks {
  virtual ~SharedBlocks() = default;
  std::vector<int32_t> ids;
};

// A recurrent-state snapshot held by a prompt-cache block: one slot of the family's state pool
// (models/layers/state_pool.h) holding, for every recurrent layer, the conv window and recurrent
// state after position end - 1 (a copy: the running sequence's own slot changes as it runs). The
// slot goes back to the pool when this goes.
struct StateSnapshot {
  virtual ~StateSnapshot() = default;
  int32_t slot = -1;
};

// One sequence's decoder state over positions [begin, end), the prompt cache's unit
// (runtime/prefix_cache.h): the K/V rows of every attention layer and, for recurrent families, the
// conv window and recurrent state after position end - 1. With a paged K/V pool the rows are the
// pool's own blocks, shared (`shared`, no copy); with a state pool the recurrent state is a slot of
// it (`state`); otherwise copies in `tensors` (family order, backend memory: Backend::copy).
struct CacheBlock {
  int64_t begin = 0, end = 0;
  std::vector<DeviceBuffer> tensors;
  std::unique_ptr<SharedBlocks> shared;
  std::unique_ptr<StateSnapshot> state;
  size_t nbytes() const {
    size_t n = 0;
    for (const auto& t : tensors) n += t.tensor().nbytes();
    return n;
  }
};

// A batch of rows from ONE sequence: a prefill chunk or one decode token. Row i has token
// token_ids[i] at position positions[i]; its K/V go to cache slot positions[i]; it attends to
// slots [0, positions[i]], which must already hold this sequence's earlier rows (or be rows of
// this batch at lower positions).
struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [n_rows]
  std::vector<int32_t> positions;  // [n_rows]
  // Device [n_image_rows, hidden_size] in the model dtype: row j replaces the embedding of the
  // j-th row (in batch order) whose token id is image_token_id. The count must match exactly.
  // For a chunk that starts inside an image, pass the matching slice of encode_images' output.
  // Null: no row takes an image embedding; an image-token id is then embedded as a token (a
  // generated one: Transformers' decode steps carry no pixel_values either).
  const Tensor* image_embeds = nullptr;
  std::vector<int32_t> logit_rows;  // batch rows that need logits, in the order wanted
  // StepOutput::kSampled: how each logit row's token is chosen (one per logit_rows entry; empty: every
  // row greedy, without logprobs).
  std::vector<SampleRow> sample;
  // Prompt cache: recurrent families keep their state at every position inside the batch that is a
  // multiple of 64 (counted from 0, after the rows before it), for snapshot(). Kept states live in
  // the cache until snapshot() takes them or the next forward drops them. Ignored by pure attention.
  bool keep_block_states = false;
  // Draft verification: the rows are consecutive positions continuing the cache (the last token,
  // then the drafts), each computed exactly as one-token decoding computes it (for Qwen3.5: the
  // recurrent delta rule and the conv one row at a time, never the chunked rule), and the state
  // after every row is kept so that rollback() can return to it. No image rows.
  bool decode_rows = false;
};

// What a step returns for its logit rows: the f32 logits, only each row's argmax, or only each row's
// sampled token and the logprobs its ForwardBatch::sample asks for (Backend::sample on the device).
enum class StepOutput { kLogits, kArgmax, kSampled };

// One sequence's rows inside a step (Model::forward_step): its batch and its cache. A step holds each
// cache at most once.
struct Segment {
  const ForwardBatch* batch = nullptr;
  SequenceCache* cache = nullptr;
};

// Receives named intermediates (HF module names, e.g. "model.language_model.layers.3") as host
// tensors in the model dtype. Shapes are the engine's ([n_rows, ...]), not always HF's.
using CaptureFn = std::function<void(const std::string& hf_module_name, const Tensor& host)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual Backend& backend() = 0;
  // Image tokens the decoder gets for an image processed to height×width pixels.
  virtual int64_t n_image_tokens(int64_t height, int64_t width) const = 0;
  // Vision tower + projector over several images (each attends only to itself). Returns device
  // [Σ n_image_tokens, hidden_size], images in order, tokens row-major over each merged grid.
  virtual Expected<DeviceBuffer> encode_images(const std::vector<ImageInput>& images) = 0;
  // A cache for positions [0, capacity). With a paged K/V pool nothing is allocated yet: blocks are
  // taken as positions are reserved (reserve(), or forward_step for what a segment writes).
  virtual std::unique_ptr<SequenceCache> new_cache(int64_t capacity) = 0;

  // ---- paged K/V pool (families that have one; models/layers/kv_pool.h) -------------------------
  struct KvPoolStats {
    int64_t blocks = 0, free = 0;  // blocks = 0: no pool (per-sequence caches)
    size_t block_bytes = 0;        // one block of kKvBlock positions over every layer
    // Recurrent-state slots (models/layers/state_pool.h): one per live sequence, the others free
    // for prompt-cache snapshots (CacheBlock::state); 0: no state pool. state_slot_bytes: one slot
    // over every recurrent layer (known before the pool is made, to size it).
    int64_t state_slots = 0, state_slots_free = 0;
    size_t state_slot_bytes = 0;
  };
  // Sizes the pool: before the first new_cache (error afterwards). Without it the first new_cache
  // makes a pool of max(1024, 64 sequences of its capacity) blocks.
  virtual Status set_kv_pool_blocks(int64_t /*n_blocks*/) { return {}; }
  virtual size_t kv_block_bytes() const { return 0; }
  // Sizes the recurrent-state pool of hybrid families (a slot per live sequence and per prompt-cache
  // snapshot): before the first new_cache (error afterwards). A no-op for families without one.
  virtual Status set_state_slots(int64_t /*n_slots*/) { return {}; }
  virtual KvPoolStats kv_pool_stats() const { return {}; }
  // Makes positions [0, n_positions) of the cache writable. False when the pool has no free block
  // (or, for hybrid families, no free state slot for a cache that holds none)
  // left (the blocks taken so far stay with the cache).
  virtual bool reserve(SequenceCache& /*cache*/, int64_t /*n_positions*/) { return true; }
  // Returns host F32 logits [logit_rows.size(), vocab_size] (HF: bf16 lm_head output, .float()).
  // Errors (nothing changed in the cache): bad ids/positions, image row count mismatch.
  Expected<Buffer> forward(const ForwardBatch& batch, SequenceCache& cache) {
    const Segment seg{&batch, &cache};
    return forward_step(std::span<const Segment>(&seg, 1));
  }
  // One step over the rows of several sequences (the batched engine's unit of work): every layer
  // runs once over all rows of all segments (the linears see one matrix), attention and recurrences
  // per segment inside the op. A row's bits never depend on the other segments, their number or
  // order (docs/design.md, invariant 2). Returns host F32 logits [Σ logit_rows, vocab], segments in
  // order. Every segment is checked before anything runs: an error changes no cache.
  // With StepOutput::kArgmax only the greedy choice of each logit row comes back: I32 [Σ logit_rows],
  // the first index of the row's maximum (torch.argmax over the same f32 logits), computed on the
  // device so the logits never leave it.
  // With StepOutput::kSampled: I32 [Σ logit_rows, w], each row's record of Backend::sample with the
  // row's ForwardBatch::sample parameters (w = 1 when no row asks for logprobs; read it from dim(1)).
  virtual Expected<Buffer> forward_step(std::span<const Segment> segments,
                                        StepOutput out = StepOutput::kLogits) = 0;
  // Null to switch capturing off.
  virtual void set_capture(CaptureFn fn) = 0;
  // Called once per sequence before its first forward, with the whole prompt and each image's
  // grid (t, h, w in patches; empty for families without one). Families whose positions are not
  // plain (Qwen3.5's M-RoPE) plan them here.
  virtual Status begin_prompt(SequenceCache& /*cache*/, const std::vector<int32_t>& /*prompt_ids*/,
                              const std::vector<std::vector<int64_t>>& /*image_grids*/) {
    return {};
  }

  // ---- prompt cache (runtime/prefix_cache.h) ---------------------------------------------------
  // Copies this sequence's state over [begin, end) into a new block. begin and end are multiples of
  // 64 (end may also be the current length), rows [0, end) are computed, and for recurrent families
  // the state at `end` is the current one or was kept by the last forward (keep_block_states). With
  // a state pool the block takes a free slot of it: error (nothing changed) when none is free.
  virtual Expected<CacheBlock> snapshot(SequenceCache& cache, int64_t begin, int64_t end) = 0;
  // Fills a fresh cache (nothing forwarded yet; begin_prompt may have run) from blocks that cover
  // [0, end) in order: K/V rows of each, and the recurrent state of the last. The next forward
  // continues at position end. Error (cache unchanged) when the blocks do not fit or do not chain.
  // A recurrent state is copied from the last block's snapshot slot into the cache's own slot.
  virtual Status restore(SequenceCache& cache, const std::vector<const CacheBlock*>& blocks) = 0;

  // ---- drafts (runtime/drafts.h) ---------------------------------------------------------------
  // Drops positions >= n_positions. After a decode_rows forward over positions [p0, p0 + n),
  // n_positions may be anything in [p0 + 1, p0 + n]: the cache is then bit for bit what one-token
  // decoding leaves after position n_positions - 1. Error (nothing changed) for other values.
  virtual Status rollback(SequenceCache& cache, int64_t n_positions) = 0;
  // Multi-token-prediction layers the checkpoint carries and the model can draft with (0: none).
  virtual int64_t n_mtp_layers() const { return 0; }
  // From now on every forward on this cache also runs the MTP module over its rows, so the MTP
  // layer's own KV cache stays in step (call before the first forward). Error without MTP layers.
  virtual Status enable_mtp(SequenceCache& /*cache*/) { return make_error("this model has no MTP layers"); }
  // Up to k greedy MTP proposals for the tokens after `next_token`, the sampled token that follows
  // the cache's last position (it is not forwarded yet). Proposals only: the caller verifies them.
  struct MtpRequest {
    SequenceCache* cache = nullptr;
    int32_t next_token = 0;
    int k = 0;
  };
  Expected<std::vector<int32_t>> propose_mtp(SequenceCache& cache, int32_t next_token, int k) {
    const MtpRequest r{&cache, next_token, k};
    TF_ASSIGN(std::vector<std::vector<int32_t>> d, propose_mtp_batch(std::span<const MtpRequest>(&r, 1)));
    return std::move(d[0]);
  }
  // propose_mtp for several sequences (distinct caches) at once: each chain's step i of every sequence
  // runs as one row of one MTP pass, so k passes (one argmax download each) serve the whole batch. A
  // sequence's proposals and cache are bit for bit what propose_mtp alone gives (rows never depend on
  // the other rows of a pass). Every request is checked before anything runs: error, nothing changed.
  virtual Expected<std::vector<std::vector<int32_t>>> propose_mtp_batch(
      std::span<const MtpRequest> /*reqs*/) {
    return make_error("this model has no MTP layers");
  }
};

}  // namespace tf
