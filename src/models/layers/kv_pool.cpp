#include "models/layers/kv_pool.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "base/status.h"
#include "models/layers/util.h"

namespace tf {

KvPool::KvPool(Backend& b, DType act, int64_t n_layers, int64_t kv_heads, int64_t head_dim,
               int64_t n_blocks) {
  TF_CHECK(n_blocks > 0 && n_blocks < (int64_t{1} << 31) / kKvBlock);
  const Shape s{n_blocks * kKvBlock, kv_heads, head_dim};
  for (int64_t l = 0; l < n_layers; ++l) {
    k_.push_back(b.alloc_pool(act, s));
    v_.push_back(b.alloc_pool(act, s));
  }
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int64_t i = n_blocks - 1; i >= 0; --i) free_.push_back(static_cast<int32_t>(i));
}

size_t KvPool::block_bytes(DType act, int64_t n_layers, int64_t kv_heads, int64_t head_dim) {
  return static_cast<size_t>(2 * n_layers * kKvBlock * kv_heads * head_dim) * dtype_size(act);
}

int32_t KvPool::alloc() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvPool::ref(int32_t block) {
  TF_CHECK(refs_[static_cast<size_t>(block)] > 0);
  ++refs_[static_cast<size_t>(block)];
}

void KvPool::unref(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  TF_CHECK(r > 0);
  if (--r == 0) free_.push_back(block);
}

BlockTable::~BlockTable() {
  for (int32_t b : blocks_) pool_->unref(b);
}

bool BlockTable::grow(int64_t n_positions) {
  while (static_cast<int64_t>(blocks_.size()) * kKvBlock < n_positions) {
    const int32_t b = pool_->alloc();
    if (b < 0) return false;
    blocks_.push_back(b);
  }
  return true;
}

void BlockTable::append_shared(int32_t block) {
  pool_->ref(block);
  blocks_.push_back(block);
}

bool BlockTable::make_private(size_t i, Backend& b) {
  const int32_t old = blocks_[i];
  if (pool_->refs(old) == 1) return true;
  const int32_t fresh = pool_->alloc();
  if (fresh < 0) return false;
  for (size_t l = 0; l < pool_->n_layers(); ++l)
    for (const Tensor* t : {&pool_->k(l), &pool_->v(l)})
      b.copy(t->slice_rows(old * kKvBlock, (old + 1) * kKvBlock),
             t->slice_rows(fresh * kKvBlock, (fresh + 1) * kKvBlock));
  pool_->unref(old);
  blocks_[i] = fresh;
  return true;
}

Expected<PagedStep> page_step(const std::vector<BlockTable*>& tabs, const StepRows& rows, Backend& b) {
  PagedStep p;
  p.slots.resize(static_cast<size_t>(rows.n_rows()));
  p.seg_rows.assign(rows.off.begin(), rows.off.end());
  for (size_t s = 0; s < tabs.size(); ++s) {
    BlockTable& tab = *tabs[s];
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t i = rows.begin(s); i < rows.end(s); ++i) {
      lo = std::min<int64_t>(lo, rows.positions[static_cast<size_t>(i)]);
      hi = std::max<int64_t>(hi, rows.positions[static_cast<size_t>(i)] + 1);
    }
    bool ok = tab.grow(hi);
    for (int64_t blk = lo / kKvBlock; ok && blk * kKvBlock < hi; ++blk)
      ok = tab.make_private(static_cast<size_t>(blk), b);
    if (!ok)
      return make_error("forward: the K/V pool is full (" + std::to_string(tab.pool().n_blocks()) +
                        " blocks)");
    for (int64_t i = rows.begin(s); i < rows.end(s); ++i)
      p.slots[static_cast<size_t>(i)] = tab.slot(rows.positions[static_cast<size_t>(i)]);
    p.max_blocks = std::max<int64_t>(p.max_blocks, static_cast<int64_t>(tab.blocks().size()));
  }
  p.tables.assign(tabs.size() * static_cast<size_t>(p.max_blocks), 0);
  for (size_t s = 0; s < tabs.size(); ++s)
    std::copy(tabs[s]->blocks().begin(), tabs[s]->blocks().end(),
              p.tables.begin() + static_cast<std::ptrdiff_t>(s * static_cast<size_t>(p.max_blocks)));
  const int64_t n_seg = static_cast<int64_t>(tabs.size());
  // TF_PAGED_ATTENTION_CUT=0: one call however the step mixes (benchmarks; the same results).
  static const bool cut_on = [] {
    const char* e = std::getenv("TF_PAGED_ATTENTION_CUT");
    return !(e && std::string(e) == "0");
  }();
  int64_t cut = 0;
  while (cut < n_seg &&
         rows.end(static_cast<size_t>(cut)) - rows.begin(static_cast<size_t>(cut)) <= PagedStep::kFewRows)
    ++cut;
  if (cut_on && cut > 0 && cut < n_seg) {
    p.cut_segs = cut;
    p.cut_rows = p.seg_rows[static_cast<size_t>(cut)];
    for (int64_t s = cut; s <= n_seg; ++s)
      p.tail_seg_rows.push_back(p.seg_rows[static_cast<size_t>(s)] - static_cast<int32_t>(p.cut_rows));
  }
  return p;
}

PagedCut upload_cut(Backend& b, const PagedStep& p, DeviceBuffer& tail) {
  if (p.cut_segs <= 0) return {};
  tail = upload_i32(b, p.tail_seg_rows);
  return {&tail.tensor(), p.cut_segs, p.cut_rows};
}

void paged_attention_cut(Backend& b, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                         const Tensor& tables, const Tensor& seg_rows, const PagedCut& cut,
                         const Tensor& ranges, float scale, const Tensor& out) {
  if (!cut.tail_seg_rows) {
    b.paged_attention(q, k_pool, v_pool, tables, seg_rows, ranges, scale, out);
    return;
  }
  const int64_t n = q.dim(0), n_seg = tables.dim(0), r = cut.rows;
  b.paged_attention(q.slice_rows(0, r), k_pool, v_pool, tables.slice_rows(0, cut.segs),
                    seg_rows.slice_rows(0, cut.segs + 1), ranges.slice_rows(0, r), scale,
                    out.slice_rows(0, r));
  b.paged_attention(q.slice_rows(r, n), k_pool, v_pool, tables.slice_rows(cut.segs, n_seg),
                    *cut.tail_seg_rows, ranges.slice_rows(r, n), scale, out.slice_rows(r, n));
}

PoolBlockRefs::PoolBlockRefs(std::shared_ptr<KvPool> pool, std::vector<int32_t> blocks)
    : pool_(std::move(pool)) {
  ids = std::move(blocks);
  for (int32_t b : ids) pool_->ref(b);
}

PoolBlockRefs::~PoolBlockRefs() {
  for (int32_t b : ids) pool_->unref(b);
}

}  // namespace tf
