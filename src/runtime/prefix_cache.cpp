#include "runtime/prefix_cache.h"

#include <cstring>

namespace tf {

std::vector<std::string> prompt_block_keys(const std::vector<int32_t>& ids, int64_t image_token_id,
                                           const std::vector<ProcessedImage>& images) {
  const size_t n_blocks = ids.size() / static_cast<size_t>(PrefixCache::kBlock);
  std::vector<std::string> keys(n_blocks);
  size_t image = 0;
  int64_t row_in_image = 0;
  for (size_t i = 0; i < n_blocks * static_cast<size_t>(PrefixCache::kBlock); ++i) {
    std::string& k = keys[i / static_cast<size_t>(PrefixCache::kBlock)];
    char id[4];
    std::memcpy(id, &ids[i], sizeof id);
    k.append(id, sizeof id);
    if (image_token_id < 0 || ids[i] != image_token_id) continue;
    // Identity, not pixels: identical images (any container) share rows, different ones never do.
    // The row's place inside its image follows from the prefix, which the tree matches already.
    while (image < images.size() && row_in_image >= images[image].n_tokens) {
      ++image;
      row_in_image = 0;
    }
    if (image < images.size()) {
      k += '\x01';
      k += images[image].identity;
      ++row_in_image;
    } else {
      k += '\x00';  // an image row without an image: such a prompt fails before it is cached
    }
  }
  return keys;
}

void PrefixCache::touch(Node* n) {
  lru_.erase(n->tick);
  n->tick = ++clock_;
  lru_[n->tick] = Entry{n, {}};
}

const PrefixCache::Node* PrefixCache::find(const std::vector<std::string>& keys, size_t n_blocks) const {
  const Node* n = &root_;
  for (size_t i = 0; i < n_blocks; ++i) {
    auto it = n->children.find(keys[i]);
    if (it == n->children.end()) return nullptr;
    n = it->second.get();
  }
  return n;
}

std::vector<const CacheBlock*> PrefixCache::match(const std::vector<std::string>& keys, size_t max_blocks) {
  std::vector<const CacheBlock*> out;
  Node* n = &root_;
  for (size_t i = 0; i < std::min(max_blocks, keys.size()); ++i) {
    auto it = n->children.find(keys[i]);
    if (it == n->children.end()) break;
    n = it->second.get();
    touch(n);  // parents before children: a child is never older than its parent
    out.push_back(&n->block);
  }
  return out;
}

bool PrefixCache::can_insert(const std::vector<std::string>& keys, size_t i) const {
  if (budget_ == 0 || i >= keys.size()) return false;
  const Node* parent = find(keys, i);
  return parent && !parent->children.count(keys[i]);
}

bool PrefixCache::insert(const std::vector<std::string>& keys, size_t i, CacheBlock block) {
  if (!can_insert(keys, i)) return false;
  Node* parent = &root_;
  for (size_t j = 0; j < i; ++j) {
    parent = parent->children.find(keys[j])->second.get();
    touch(parent);
  }
  const size_t need = block.nbytes();
  if (!make_room(need, parent)) return false;
  auto node = std::make_unique<Node>();
  node->parent = parent;
  node->key = keys[i];
  node->block = std::move(block);
  Node* raw = node.get();
  parent->children.emplace(keys[i], std::move(node));
  touch(raw);
  bytes_ += need;
  ++n_blocks_;
  if (raw->block.shared) n_shared_ += raw->block.shared->ids.size();
  if (raw->block.state) ++n_state_;
  return true;
}

bool PrefixCache::evict_lru_shared() {
  for (const auto& [tick, e] : lru_)
    if (e.node && e.node->children.empty() && (e.node->block.shared || e.node->block.state)) {
      evict(Entry(e));
      return true;
    }
  return false;
}

bool PrefixCache::evict_lru_state(const std::vector<std::string>& keys, size_t i) {
  const Node* keep = i > 0 && i <= keys.size() ? find(keys, i) : nullptr;
  for (const auto& [tick, e] : lru_)
    if (e.node && e.node != keep && e.node->children.empty() && e.node->block.state) {
      evict(Entry(e));
      return true;
    }
  return false;
}

const DeviceBuffer* PrefixCache::find_image(const std::string& identity) {
  auto it = images_.find(identity);
  if (it == images_.end()) return nullptr;
  lru_.erase(it->second.tick);
  it->second.tick = ++clock_;
  lru_[it->second.tick] = Entry{nullptr, identity};
  return &it->second.embeds;
}

bool PrefixCache::insert_image(const std::string& identity, DeviceBuffer embeds) {
  if (budget_ == 0 || images_.count(identity)) return false;
  const size_t need = embeds.tensor().nbytes();
  if (images_.size() >= kMaxImages) {
    for (auto& [tick, e] : lru_)
      if (!e.node) {
        evict(Entry(e));
        break;
      }
  }
  if (!make_room(need, nullptr)) return false;
  Image& im = images_[identity];
  im.embeds = std::move(embeds);
  im.tick = ++clock_;
  lru_[im.tick] = Entry{nullptr, identity};
  bytes_ += need;
  return true;
}

bool PrefixCache::make_room(size_t need, const Node* keep) {
  if (need > budget_) return false;
  while (bytes_ + need > budget_) {
    const Entry* victim = nullptr;
    for (const auto& [tick, e] : lru_)
      if (!e.node || (e.node != keep && e.node->children.empty())) {
        victim = &e;
        break;
      }
    if (!victim) return false;
    evict(Entry(*victim));
  }
  return true;
}

void PrefixCache::evict(const Entry& e) {
  ++n_evicted_;
  if (!e.node) {
    auto it = images_.find(e.image);
    bytes_ -= it->second.embeds.tensor().nbytes();
    lru_.erase(it->second.tick);
    images_.erase(it);
    return;
  }
  Node* n = e.node;
  bytes_ -= n->block.nbytes();
  --n_blocks_;
  if (n->block.shared) n_shared_ -= n->block.shared->ids.size();
  if (n->block.state) --n_state_;
  lru_.erase(n->tick);
  const std::string key = n->key;
  n->parent->children.erase(key);  // frees the node and its block
}

}  // namespace tf
