#include "models/layers/state_pool.h"

#include "base/status.h"

namespace tf {

StatePool::StatePool(Backend& b, DType act, int64_t n_layers, int64_t conv_dim, int64_t conv_k, int64_t heads,
                     int64_t dk, int64_t dv, int64_t n_slots)
    : b_(b) {
  TF_CHECK(n_slots > 0 && n_slots < (int64_t{1} << 31) && conv_k >= 1);
  for (int64_t l = 0; l < n_layers; ++l) {
    windows_.push_back(b.alloc_pool(act, {n_slots, conv_dim, conv_k - 1}));
    states_.push_back(b.alloc_pool(DType::F32, {n_slots, heads, dk, dv}));
  }
  zero_window_ = b.alloc(act, {conv_dim, conv_k - 1});
  zero_state_ = b.alloc(DType::F32, {heads, dk, dv});
  used_.assign(static_cast<size_t>(n_slots), 0);
  free_.reserve(static_cast<size_t>(n_slots));
  for (int64_t i = n_slots - 1; i >= 0; --i) free_.push_back(static_cast<int32_t>(i));
}

size_t StatePool::slot_bytes(DType act, int64_t n_layers, int64_t conv_dim, int64_t conv_k, int64_t heads,
                             int64_t dk, int64_t dv) {
  return static_cast<size_t>(n_layers) * (static_cast<size_t>(conv_dim * (conv_k - 1)) * dtype_size(act) +
                                          static_cast<size_t>(heads * dk * dv) * sizeof(float));
}

Tensor StatePool::window(size_t layer, int32_t slot) const {
  const Tensor& w = windows_[layer].tensor();
  return w.slice_rows(slot, slot + 1).reshaped({w.dim(1), w.dim(2)});
}

Tensor StatePool::state(size_t layer, int32_t slot) const {
  const Tensor& s = states_[layer].tensor();
  return s.slice_rows(slot, slot + 1).reshaped({s.dim(1), s.dim(2), s.dim(3)});
}

int32_t StatePool::alloc(bool zero) {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  used_[static_cast<size_t>(s)] = 1;
  if (!zero) return s;
  for (size_t l = 0; l < windows_.size(); ++l) {
    if (zero_window_.tensor().numel() > 0) b_.copy(zero_window_, window(l, s));
    b_.copy(zero_state_, state(l, s));
  }
  return s;
}

void StatePool::release(int32_t slot) {
  TF_CHECK(slot >= 0 && slot < n_slots() && used_[static_cast<size_t>(slot)]);
  used_[static_cast<size_t>(slot)] = 0;
  free_.push_back(slot);
}

void StatePool::copy_slot(int32_t src, int32_t dst) {
  TF_CHECK(in_use(src) && in_use(dst) && src != dst);
  for (size_t l = 0; l < windows_.size(); ++l) {
    if (zero_window_.tensor().numel() > 0) b_.copy(window(l, src), window(l, dst));  // K = 1: no window
    b_.copy(state(l, src), state(l, dst));
  }
}

bool StateSlot::acquire() {
  if (id_ >= 0) return true;
  id_ = pool_->alloc();
  return id_ >= 0;
}

void StateSlot::release() {
  if (id_ >= 0) pool_->release(id_);
  id_ = -1;
}

}  // namespace tf
