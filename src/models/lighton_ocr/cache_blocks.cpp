// Prompt-cache blocks for the pure-attention decoder: a block is the K/V rows of its positions in
// every layer. Rows depend only on the tokens before them, so copying them into another sequence
// that starts with the same keyed tokens gives that sequence exactly the rows it would compute.
#include "models/lighton_ocr/model.h"

namespace tf::lighton_ocr {

Expected<CacheBlock> LightOnOcrModel::snapshot(SequenceCache& seq_cache, int64_t begin, int64_t end) {
  auto* c = dynamic_cast<KvCache*>(&seq_cache);
  if (!c) return make_error("snapshot: the cache was not made by this model");
  if (begin < 0 || end <= begin || end > c->capacity())
    return make_error("snapshot: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") are outside the cache (capacity " + std::to_string(c->capacity()) + ")");
  Backend& b = backend_;
  CacheBlock blk;
  blk.begin = begin;
  blk.end = end;
  const Shape s{end - begin, cfg_.text.num_key_value_heads,
                cfg_.text.head_dim};  // [rows, kv_heads, head_dim]
  for (size_t l = 0; l < c->k.size(); ++l)
    for (const DeviceBuffer* src : {&c->k[l], &c->v[l]}) {
      DeviceBuffer d = b.alloc(info_.dtype, s);
      b.copy(src->tensor().slice_rows(begin, end), d);
      blk.tensors.push_back(std::move(d));
    }
  return blk;
}

Status LightOnOcrModel::restore(SequenceCache& seq_cache, const std::vector<const CacheBlock*>& blocks) {
  auto* c = dynamic_cast<KvCache*>(&seq_cache);
  if (!c) return make_error("restore: the cache was not made by this model");
  int64_t pos = 0;
  for (const CacheBlock* blk : blocks) {
    if (blk->begin != pos || blk->end <= pos || blk->end > c->capacity() ||
        blk->tensors.size() != 2 * c->k.size())
      return make_error("restore: blocks must chain from position 0 and fit the cache");
    for (const DeviceBuffer& t : blk->tensors)
      if (t.tensor().dtype != info_.dtype || t.tensor().rank() != 3 ||
          t.tensor().dim(0) != blk->end - blk->begin || t.tensor().dim(1) != cfg_.text.num_key_value_heads ||
          t.tensor().dim(2) != cfg_.text.head_dim)
        return make_error("restore: a block was not made by this model");
    pos = blk->end;
  }
  Backend& b = backend_;
  for (const CacheBlock* blk : blocks)
    for (size_t l = 0; l < c->k.size(); ++l) {
      b.copy(blk->tensors[2 * l], c->k[l].tensor().slice_rows(blk->begin, blk->end));
      b.copy(blk->tensors[2 * l + 1], c->v[l].tensor().slice_rows(blk->begin, blk->end));
    }
  return {};
}

}  // namespace tf::lighton_ocr
