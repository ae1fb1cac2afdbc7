// Prompt-cache blocks for the pure-attention decoder: a block is the pool blocks holding the K/V
// rows of its positions in every layer, shared, not copied. Rows depend only on the tokens before
// them, so another sequence that starts with the same keyed tokens reads exactly the rows it would
// compute. A sequence never rewrites a shared block in place: forward_step gives it a private copy
// first (the partial last block of a snapshot that ends mid-block is the only case that arises).
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

Expected<CacheBlock> LightOnOcrModel::snapshot(SequenceCache& seq_cache, int64_t begin, int64_t end) {
  auto* c = dynamic_cast<KvCache*>(&seq_cache);
  if (!c || &c->table.pool() != pool_.get())
    return make_error("snapshot: the cache was not made by this model");
  const int64_t held = static_cast<int64_t>(c->table.blocks().size()) * kKvBlock;
  if (begin < 0 || end <= begin || end > std::min(held, c->capacity()))
    return make_error("snapshot: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") are outside the cache (it holds " + std::to_string(std::min(held, c->capacity())) +
                      ")");
  if (begin % kKvBlock != 0)
    return make_error("snapshot: rows must start on a multiple of " + std::to_string(kKvBlock));
  CacheBlock blk;
  blk.begin = begin;
  blk.end = end;
  const auto& all = c->table.blocks();
  std::vector<int32_t> ids(all.begin() + begin / kKvBlock, all.begin() + (end + kKvBlock - 1) / kKvBlock);
  blk.shared = std::make_unique<PoolBlockRefs>(pool_, std::move(ids));
  return blk;
}

Status LightOnOcrModel::restore(SequenceCache& seq_cache, const std::vector<const CacheBlock*>& blocks) {
  auto* c = dynamic_cast<KvCache*>(&seq_cache);
  if (!c || &c->table.pool() != pool_.get())
    return make_error("restore: the cache was not made by this model");
  if (!c->table.blocks().empty()) return make_error("restore: the cache is not fresh");
  int64_t pos = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const CacheBlock* blk = blocks[i];
    const auto* refs = dynamic_cast<const PoolBlockRefs*>(blk->shared.get());
    if (!refs || refs->pool() != pool_.get() || !blk->tensors.empty())
      return make_error("restore: a block was not made by this model");
    const bool last = i + 1 == blocks.size();
    if (blk->begin != pos || blk->end <= pos || blk->end > c->capacity() ||
        (!last && blk->end % kKvBlock != 0) ||
        static_cast<int64_t>(refs->ids.size()) != (blk->end - blk->begin + kKvBlock - 1) / kKvBlock)
      return make_error("restore: blocks must chain from position 0 and fit the cache");
    pos = blk->end;
  }
  for (const CacheBlock* blk : blocks)
    for (int32_t id : blk->shared->ids) c->table.append_shared(id);
  return {};
}

}  // namespace tf::lighton_ocr
