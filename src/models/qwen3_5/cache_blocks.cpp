// Prompt-cache blocks for the hybrid decoder: K/V rows of the full-attention layers, and for the
// Gated DeltaNet layers the conv window and delta-rule state at the block's end. Those states are
// taken at multiples of 64 counted from position 0, where a chunked prefill's chunk boundaries
// fall anyway, so a sequence resumed from them continues exactly as the single pass would.
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
  if (!c) return make_error("snapshot: the cache was not made by this model");
  if (begin < 0 || end <= begin || end > c->n_past())
    return make_error("snapshot: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") are not computed (the cache holds " + std::to_string(c->n_past()) + ")");
  Qwen35Cache::BlockState* kept = nullptr;
  for (auto& s : c->block_states)
    if (s.pos == end) kept = &s;
  if (!kept && end != c->n_past())
    return make_error("snapshot: no recurrent state was kept at position " + std::to_string(end));
  Backend& b = backend_;
  CacheBlock blk;
  blk.begin = begin;
  blk.end = end;
  for (size_t l = 0; l < c->k.size(); ++l) {
    if (!c->k[l].empty()) {
      for (const DeviceBuffer* src : {&c->k[l], &c->v[l]}) {
        Shape s = src->tensor().shape;  // [rows, Hkv, D]
        s[0] = end - begin;
        DeviceBuffer d = b.alloc(info_.dtype, s);
        b.copy(src->tensor().slice_rows(begin, end), d);
        blk.tensors.push_back(std::move(d));
      }
    } else if (kept) {
      // The kept copies become the block's own: no second copy.
      blk.tensors.push_back(std::move(kept->conv[l]));
      blk.tensors.push_back(std::move(kept->state[l]));
    } else {
      for (const DeviceBuffer* src : {&c->conv[l], &c->state[l]}) {
        DeviceBuffer d = b.alloc(src->tensor().dtype, src->tensor().shape);
        b.copy(*src, d);
        blk.tensors.push_back(std::move(d));
      }
    }
  }
  if (kept) kept->pos = -1;  // taken
  return blk;
}

Status Qwen35Model::restore(SequenceCache& seq_cache, const std::vector<const CacheBlock*>& blocks) {
  auto* c = dynamic_cast<Qwen35Cache*>(&seq_cache);
  if (!c) return make_error("restore: the cache was not made by this model");
  if (c->n_past() != 0) return make_error("restore: the cache already holds rows");
  // The MTP layers' own K/V are not part of a block: MTP drafts over a resumed prefix read stale
  // K/V there, which makes them worse proposals, never different output (drafts are verified).
  if (blocks.empty()) return {};
  int64_t pos = 0;
  for (const CacheBlock* blk : blocks) {
    if (blk->begin != pos || blk->end <= pos || blk->end > c->capacity() ||
        blk->tensors.size() != 2 * c->k.size())
      return make_error("restore: blocks must chain from position 0 and fit the cache");
    for (size_t l = 0; l < c->k.size(); ++l) {
      const bool attn = !c->k[l].empty();
      const Tensor& a = blk->tensors[2 * l];
      const Tensor& s = blk->tensors[2 * l + 1];
      const Tensor& ref_a = attn ? c->k[l].tensor() : c->conv[l].tensor();
      const Tensor& ref_s = attn ? c->v[l].tensor() : c->state[l].tensor();
      const int64_t rows = attn ? blk->end - blk->begin : ref_a.dim(0);
      if (a.dtype != ref_a.dtype || s.dtype != ref_s.dtype || a.rank() != ref_a.rank() || a.dim(0) != rows ||
          a.numel() / std::max<int64_t>(rows, 1) != ref_a.numel() / ref_a.dim(0) ||
          s.numel() != (attn ? a.numel() : ref_s.numel()))
        return make_error("restore: a block was not made by this model");
    }
    pos = blk->end;
  }
  Backend& b = backend_;
  for (const CacheBlock* blk : blocks)
    for (size_t l = 0; l < c->k.size(); ++l)
      if (!c->k[l].empty()) {
        b.copy(blk->tensors[2 * l], c->k[l].tensor().slice_rows(blk->begin, blk->end));
        b.copy(blk->tensors[2 * l + 1], c->v[l].tensor().slice_rows(blk->begin, blk->end));
      }
  const CacheBlock& last = *blocks.back();
  for (size_t l = 0; l < c->k.size(); ++l)
    if (c->k[l].empty()) {
      b.copy(last.tensors[2 * l], c->conv[l]);
      b.copy(last.tensors[2 * l + 1], c->state[l]);
    }
  c->n_past_ = last.end;
  return {};
}

}  // namespace tf::qwen3_5
