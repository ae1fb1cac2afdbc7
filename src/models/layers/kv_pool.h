// The paged K/V cache (issue 15): one pool of kKvBlock-position blocks per model instance, shared by
// every sequence of the engine and by the prompt cache. A sequence holds a block table (its blocks in
// position order); a prompt-cache block holds references to the blocks it shares, so a resumed
// sequence reads the cached rows in place, without copies. Blocks are reference-counted and return
// to the free list when the last holder lets go.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "models/layers/step_rows.h"
#include "models/model.h"

namespace tf {

class KvPool {
 public:
  // Per attention layer k and v of [n_blocks * kKvBlock, kv_heads, head_dim] in act.
  KvPool(Backend& b, DType act, int64_t n_layers, int64_t kv_heads, int64_t head_dim, int64_t n_blocks);
  // Bytes of one block over every layer (k and v).
  static size_t block_bytes(DType act, int64_t n_layers, int64_t kv_heads, int64_t head_dim);

  int64_t n_blocks() const { return static_cast<int64_t>(refs_.size()); }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }
  // A free block with one reference, or -1 when none is left.
  int32_t alloc();
  void ref(int32_t block);
  void unref(int32_t block);
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }
  const Tensor& k(size_t layer) const { return k_[layer].tensor(); }
  const Tensor& v(size_t layer) const { return v_[layer].tensor(); }
  size_t n_layers() const { return k_.size(); }

 private:
  std::vector<DeviceBuffer> k_, v_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

// A sequence's blocks in position order. Releases them when destroyed.
class BlockTable {
 public:
  explicit BlockTable(std::shared_ptr<KvPool> pool) : pool_(std::move(pool)) {}
  ~BlockTable();
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;
  // Allocates blocks until positions [0, n_positions) have one. False when the pool ran out (the
  // blocks taken so far stay).
  bool grow(int64_t n_positions);
  // Pool row of position pos (its block must exist).
  int32_t slot(int64_t pos) const {
    return static_cast<int32_t>(blocks_[static_cast<size_t>(pos / kKvBlock)] * kKvBlock + pos % kKvBlock);
  }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  // Appends a block shared with its other holders (one more reference): restored prompt-cache rows.
  void append_shared(int32_t block);
  // Before writing into block i: when it is shared, replaces it by a private copy of its rows.
  // False when the pool has no block for the copy.
  bool make_private(size_t i, Backend& b);
  KvPool& pool() { return *pool_; }

 private:
  std::shared_ptr<KvPool> pool_;
  std::vector<int32_t> blocks_;
};

// One step's view of the pool (Backend::paged_attention's inputs): segment s (table tabs[s], its rows
// those of `rows`) gets blocks for every position it writes, a shared block being copied first; then
// the pool row of every step row and the segments' block tables. Error when the pool is full (the blocks
// taken so far stay with their sequences; nothing else changed).
struct PagedStep {
  std::vector<int32_t> slots;     // [n_rows]: pool row of each step row's K/V
  std::vector<int32_t> tables;    // [n_seg, max_blocks]: each segment's blocks (unused entries 0)
  std::vector<int32_t> seg_rows;  // [n_seg + 1]: row offsets
  int64_t max_blocks = 1;
  // The cut between the step's leading few-row segments (decode, draft verification: at most kFewRows rows
  // each; the engine puts them first) and the rest (prefill chunks): segments [0, cut_segs), rows
  // [0, cut_rows); tail_seg_rows = seg_rows[cut_segs ..] - cut_rows. cut_segs is 0 where the step is all
  // of one kind.
  static constexpr int64_t kFewRows = 16;
  int64_t cut_segs = 0, cut_rows = 0;
  std::vector<int32_t> tail_seg_rows;
};
Expected<PagedStep> page_step(const std::vector<BlockTable*>& tabs, const StepRows& rows, Backend& b);

// A PagedStep's cut on the device (tail_seg_rows null: none; the model's inputs carry it to its layers).
struct PagedCut {
  const Tensor* tail_seg_rows = nullptr;  // [n_seg - segs + 1]
  int64_t segs = 0, rows = 0;
};
// Uploads p's tail_seg_rows into `tail` where p has a cut; the cut that refers to it.
PagedCut upload_cut(Backend& b, const PagedStep& p, DeviceBuffer& tail);

// Backend::paged_attention over a step's rows, as two calls where the step has a cut: the few-row segments,
// then the rest, so that a backend runs each with the kernels shaped for it (the CUDA backend's decode blocks
// need few rows per segment). Every row is computed from its own query, key range and table alone: the same
// result as one call.
void paged_attention_cut(Backend& b, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                         const Tensor& tables, const Tensor& seg_rows, const PagedCut& cut,
                         const Tensor& ranges, float scale, const Tensor& out);

// References to pool blocks held by a prompt-cache block (CacheBlock::shared).
class PoolBlockRefs final : public SharedBlocks {
 public:
  PoolBlockRefs(std::shared_ptr<KvPool> pool, std::vector<int32_t> blocks);
  ~PoolBlockRefs() override;
  const KvPool* pool() const { return pool_.get(); }

 private:
  std::shared_ptr<KvPool> pool_;
};

}  // namespace tf
