// Prompt-cache blocks for the hybrid decoder: the pool blocks holding the K/V rows of the
// full-attention layers, shared, not copied (forward_step copies a shared block before it writes
// into it), and for the Gated DeltaNet layers a slot of the state pool (models/layers/state_pool.h)
// holding a copy of every layer's conv window and delta-rule state at the block's end. Those states
// are taken at multiples of 64 counted from position 0, where a chunked prefill's chunk boundaries
// fall anyway, so a sequence resumed from them (a copy of the snapshot slot into its own slot)
// continues exactly as the single pass would.
#include "models/qwen3_5/model.h"

namespace tf::qwen3_5 {

namespace {
constexpr int64_t kBlockAlign = 64;  // the delta rule's chunk
}

void Qwen35Model::prepare_block_states(Qwen35Cache& c, int64_t pos0, int64_t n, bool keep) {
  c.block_states.clear();
  c.keep_block_states = keep;
  if (!keep) return;
  Backend& b = backend_;
  for (int64_t p = (pos0 / kBlockAlign + 1) * kBlockAlign; p <= pos0 + n; p += kBlockAlign) {
    Qwen35Cache::BlockState s;
    s.pos = p;
    for (size_t l = 0; l < c.conv.size(); ++l) {
      if (c.conv[l].empty()) {
        s.conv.emplace_back();
        s.state.emplace_back();
        continue;
      }
      s.conv.push_back(b.alloc(c.conv[l].tensor().dtype, c.conv[l].tensor().shape));
      s.state.push_back(b.alloc(c.state[l].tensor().dtype, c.state[l].tensor().shape));
    }
    c.block_states.push_back(std::move(s));
  }
}

Expected<CacheBlock> Qwen35Model::snapshot(SequenceCache& seq_cache, int64_t begin, int64_t end) {
  auto* c = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!c || &c->table.pool() != pool_.get())
    return make_error("snapshot: the cache was not made by this model");
  if (begin < 0 || end <= begin || end > c->n_past())
    return make_error("snapshot: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") are not computed (the cache holds " + std::to_string(c->n_past()) + ")");
  if (begin % kKvBlock != 0)
    return make_error("snapshot: rows must start on a multiple of " + std::to_string(kKvBlock));
  Qwen35Cache::BlockState* kept = nullptr;
  for (auto& s : c->block_states)
    if (s.pos == end) kept = &s;
  if (!kept && end != c->n_past())
    return make_error("snapshot: no recurrent state was kept at position " + std::to_string(end));
  // The snapshot's slot: taken from the free ones (running sequences hold theirs already), filled
  // at once. Its old contents are overwritten in every layer, so it is not zeroed first.
  const int32_t slot = states_->alloc(/*zero=*/false);
  if (slot < 0) return make_error("snapshot: the state pool has no free slot");
  CacheBlock blk;
  blk.begin = begin;
  blk.end = end;
  blk.state = std::make_unique<SnapshotSlot>(states_, slot);
  const auto& all = c->table.blocks();
  std::vector<int32_t> ids(all.begin() + begin / kKvBlock, all.begin() + (end + kKvBlock - 1) / kKvBlock);
  blk.shared = std::make_unique<PoolBlockRefs>(pool_, std::move(ids));
  if (kept) {
    Backend& b = backend_;
    for (size_t l = 0; l < c->conv.size(); ++l) {
      if (c->conv[l].empty()) continue;  // full attention: in the shared blocks
      const size_t pl = static_cast<size_t>(c->state_layer[l]);
      if (states_->window(pl, slot).numel() > 0) b.copy(kept->conv[l], states_->window(pl, slot));
      b.copy(kept->state[l], states_->state(pl, slot));
    }
    kept->pos = -1;  // taken: its scratch goes now
    kept->conv.clear();
    kept->state.clear();
  } else {
    states_->copy_slot(c->slot.id(), slot);  // the current state: end is the cache's length
  }
  return blk;
}

Status Qwen35Model::restore(SequenceCache& seq_cache, const std::vector<const CacheBlock*>& blocks) {
  auto* c = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!c || &c->table.pool() != pool_.get())
    return make_error("restore: the cache was not made by this model");
  if (c->n_past() != 0 || !c->table.blocks().empty())
    return make_error("restore: the cache already holds rows");
  if (!ensure_slot(*c)) return make_error("restore: the state pool has no free slot");
  // The MTP layers' own K/V are not part of a block: MTP drafts over a resumed prefix read stale
  // K/V there, which makes them worse proposals, never different output (drafts are verified).
  if (blocks.empty()) return {};
  int64_t pos = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const CacheBlock* blk = blocks[i];
    const bool last = i + 1 == blocks.size();
    if (blk->begin != pos || blk->end <= pos || blk->end > c->capacity() ||
        (!last && blk->end % kKvBlock != 0))
      return make_error("restore: blocks must chain from position 0 and fit the cache");
    const auto* refs = dynamic_cast<const PoolBlockRefs*>(blk->shared.get());
    const auto* snap = dynamic_cast<const SnapshotSlot*>(blk->state.get());
    const bool ok =
        refs && refs->pool() == pool_.get() &&
        static_cast<int64_t>(refs->ids.size()) == (blk->end - blk->begin + kKvBlock - 1) / kKvBlock && snap &&
        snap->pool() == states_.get() && states_->in_use(snap->slot) && blk->tensors.empty();
    if (!ok) return make_error("restore: a block was not made by this model");
    pos = blk->end;
  }
  for (const CacheBlock* blk : blocks)
    for (int32_t id : blk->shared->ids) c->table.append_shared(id);
  const CacheBlock& last = *blocks.back();
  states_->copy_slot(last.state->slot, c->slot.id());  // a copy: the sequence's slot changes as it runs
  c->n_past_ = last.end;
  return {};
}

}  // namespace tf::qwen3_5
