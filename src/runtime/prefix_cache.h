// The prompt cache: a radix tree over blocks of 64 prompt positions whose keys are the token ids,
// with every image-placeholder row also carrying its image's identity (SHA-256 of the decoded RGB
// pixels + processor settings). Two different images never share a row, even at the same size;
// the same pixels sent as PNG and as lossless WebP do. Each node holds its block's decoder state
// (Model::snapshot); a new sequence takes the longest matching chain into its own cache
// (Model::restore) and computes only the rest. Vision-encoder outputs are cached by identity too.
// LRU eviction keeps everything within one byte budget; only leaves (and images) are evicted, so
// every cached block's prefix stays cached. Blocks whose state lives in the model's pools are
// outside that budget: K/V pool blocks (CacheBlock::shared) and, for hybrid families, one slot of
// the recurrent-state pool per block (CacheBlock::state, models/layers/state_pool.h); the engine
// evicts the least recently used such leaf when a running sequence needs the block or slot, or a new
// snapshot needs a slot. Used by the engine thread only (not thread-safe).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/processor.h"

namespace tf {

// Keys of the prompt's complete blocks (ids.size() / kBlock of them), in order. Image rows take
// images in placeholder order, images[k].n_tokens rows each.
std::vector<std::string> prompt_block_keys(const std::vector<int32_t>& ids, int64_t image_token_id,
                                           const std::vector<ProcessedImage>& images);

class PrefixCache {
 public:
  static constexpr int64_t kBlock = 64;  // Qwen3.5's delta-rule chunk: resume points are multiples
  static constexpr size_t kMaxImages = 64;

  explicit PrefixCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The cached blocks for keys[0], keys[1], … (at most max_blocks), marked most recently used.
  // Pointers stay valid until the next insert.
  std::vector<const CacheBlock*> match(const std::vector<std::string>& keys, size_t max_blocks);
  // True when blocks 0..i-1 of this key path are cached and block i is not.
  bool can_insert(const std::vector<std::string>& keys, size_t i) const;
  // Adds block i below the cached chain keys[0..i-1]. False (block dropped) when the chain is not
  // cached, block i already is, or it does not fit even after evicting everything evictable.
  bool insert(const std::vector<std::string>& keys, size_t i, CacheBlock block);

  // Vision-encoder output [n_tokens, hidden] of one image, or null. Pointer valid until the next insert.
  const DeviceBuffer* find_image(const std::string& identity);
  bool insert_image(const std::string& identity, DeviceBuffer embeds);

  // Paged K/V and state slots: cached blocks hold pool blocks (CacheBlock::shared) and state-pool
  // slots (CacheBlock::state) outside the byte budget. When a pool runs dry for a running sequence
  // the engine evicts the least recently used such leaf; false when none is left.
  bool evict_lru_shared();
  // For a state slot only: evicts the least recently used leaf holding one (CacheBlock::state),
  // other than the last block of keys[0..i-1] (the parent of a block about to be inserted; i = 0:
  // no exception). False when none is left.
  bool evict_lru_state(const std::vector<std::string>& keys = {}, size_t i = 0);
  // Pool blocks the cached prompt blocks hold references to.
  size_t n_shared_blocks() const { return n_shared_; }
  // State-pool slots the cached prompt blocks hold (one per block of a hybrid family).
  size_t n_state_slots() const { return n_state_; }

  size_t bytes() const { return bytes_; }
  size_t budget() const { return budget_; }
  size_t n_blocks() const { return n_blocks_; }
  size_t n_images() const { return images_.size(); }
  int64_t n_evicted() const { return n_evicted_; }

 private:
  struct Node {
    Node* parent = nullptr;
    std::string key;
    CacheBlock block;
    std::map<std::string, std::unique_ptr<Node>> children;
    uint64_t tick = 0;
  };
  struct Image {
    DeviceBuffer embeds;
    uint64_t tick = 0;
  };
  // What an LRU tick refers to: a node, or (node null) an image.
  struct Entry {
    Node* node = nullptr;
    std::string image;
  };
  void touch(Node* n);
  const Node* find(const std::vector<std::string>& keys, size_t n_blocks) const;
  // Frees the least recently used leaf or image other than `keep` until `need` more bytes fit.
  bool make_room(size_t need, const Node* keep);
  void evict(const Entry& e);

  size_t budget_ = 0, bytes_ = 0, n_blocks_ = 0, n_shared_ = 0, n_state_ = 0;
  int64_t n_evicted_ = 0;
  uint64_t clock_ = 0;
  Node root_;
  std::map<std::string, Image> images_;
  std::map<uint64_t, Entry> lru_;  // every node and image, oldest first
};

}  // namespace tf
