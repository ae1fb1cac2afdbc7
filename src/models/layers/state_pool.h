// The recurrent-state pool (issue 15): for a hybrid decoder's recurrent layers (Qwen3.5's Gated
// DeltaNet), one buffer per layer holding every slot's conv window and one holding every slot's
// delta-rule state, sized at start like the paged K/V pool (kv_pool.h). A running sequence holds one
// slot (StateSlot), the same index in every layer; the batched ops (Backend::causal_conv1d_silu_slots,
// gated_delta_rule_*_slots) read and write the slots of all sequences of a step in place. The prompt
// cache's 64-aligned snapshots of that state live in the same pool: a cached block holds a slot
// (SnapshotSlot) with a copy of the state at its end, and a resumed sequence copies it into its own.
// Budget (runtime/engine.h, EngineOptions::snapshot_slots): the pool has the running sequences' slots
// plus the slots the prompt-cache budget pays for. Running sequences come first: any free slot may
// hold a snapshot, and a sequence that finds none free evicts the least recently used cached block
// holding one (runtime/prefix_cache.h); a snapshot that finds none free evicts an older snapshot or
// is not cached.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "models/model.h"

namespace tf {

class StatePool {
 public:
  // Per recurrent layer: windows [n_slots, conv_dim, conv_k - 1] act and states
  // [n_slots, heads, dk, dv] F32.
  StatePool(Backend& b, DType act, int64_t n_layers, int64_t conv_dim, int64_t conv_k, int64_t heads,
            int64_t dk, int64_t dv, int64_t n_slots);
  // Bytes of one slot over every layer (window and state).
  static size_t slot_bytes(DType act, int64_t n_layers, int64_t conv_dim, int64_t conv_k, int64_t heads,
                           int64_t dk, int64_t dv);

  int64_t n_slots() const { return static_cast<int64_t>(used_.size()); }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }
  size_t n_layers() const { return windows_.size(); }
  // A free slot with zeroed windows and states (a sequence's start; with zero false, as it was: a
  // snapshot's, copied over at once), or -1 when none is left.
  int32_t alloc(bool zero = true);
  void release(int32_t slot);
  // dst's windows and states (every layer) = src's, device to device.
  void copy_slot(int32_t src, int32_t dst);
  bool in_use(int32_t slot) const { return used_[static_cast<size_t>(slot)] != 0; }
  // The whole pool of a layer: windows [n_slots, conv_dim, K-1], states [n_slots, heads, dk, dv].
  const Tensor& windows(size_t layer) const { return windows_[layer].tensor(); }
  const Tensor& states(size_t layer) const { return states_[layer].tensor(); }
  // One slot of a layer: window [conv_dim, K-1], state [heads, dk, dv].
  Tensor window(size_t layer, int32_t slot) const;
  Tensor state(size_t layer, int32_t slot) const;

 private:
  Backend& b_;
  std::vector<DeviceBuffer> windows_, states_;
  DeviceBuffer zero_window_, zero_state_;  // what a fresh slot is reset from
  std::vector<uint8_t> used_;
  std::vector<int32_t> free_;  // a stack: the most recently released slot is reused first
};

// A sequence's hold on one slot: released when destroyed.
class StateSlot {
 public:
  explicit StateSlot(std::shared_ptr<StatePool> pool) : pool_(std::move(pool)) {}
  ~StateSlot() { release(); }
  StateSlot(const StateSlot&) = delete;
  StateSlot& operator=(const StateSlot&) = delete;
  // Takes a zeroed slot when none is held. False when the pool is exhausted.
  bool acquire();
  void release();
  int32_t id() const { return id_; }
  bool held() const { return id_ >= 0; }
  StatePool& pool() { return *pool_; }
  const StatePool* pool_ptr() const { return pool_.get(); }

 private:
  std::shared_ptr<StatePool> pool_;
  int32_t id_ = -1;
};

// A prompt-cache block's hold on one slot (CacheBlock::state): released when destroyed.
class SnapshotSlot final : public StateSnapshot {
 public:
  SnapshotSlot(std::shared_ptr<StatePool> pool, int32_t slot_id) : pool_(std::move(pool)) { slot = slot_id; }
  ~SnapshotSlot() override { pool_->release(slot); }
  SnapshotSlot(const SnapshotSlot&) = delete;
  SnapshotSlot& operator=(const SnapshotSlot&) = delete;
  const StatePool* pool() const { return pool_.get(); }

 private:
  std::shared_ptr<StatePool> pool_;
};

}  // namespace tf
