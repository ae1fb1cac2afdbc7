// Qwen3.5's prompt-cache snapshots live in its state pool (issue 15), on the committed tiny checkpoint
// (CPU in CI; TF_TEST_BACKEND=cuda on a GPU machine): a snapshot takes a free slot of the pool (and
// nothing else: no tensors of its own, nothing from the prompt cache's byte budget), a block that
// finds no free slot is refused without changing anything, evicting the block returns its slot, and
// a sequence restored from a snapshot slot holds a copy of it in its own slot, computes exactly what
// the fresh sequence computes, and leaves the snapshot as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/layers/state_pool.h"
#include "models/qwen3_5/model.h"
#include "models/registry.h"
#include "runtime/prefix_cache.h"

namespace tf {
namespace {

constexpr int64_t kPrompt = 150;  // two complete blocks of 64 and a part

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Loaded load() {
  const std::string dir = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/qwen3_5-tiny-bf16";
  Loaded out;
  auto be = create_backend(test_backend_name());
  EXPECT_TRUE(be.ok());
  out.backend = std::move(be).value();
  auto cfg = JsonConfig::load(dir + "/config.json");
  auto wm = WeightMap::open(dir);
  EXPECT_TRUE(cfg.ok() && wm.ok()) << dir;
  auto m = load_model(*cfg, std::move(wm).value(), *out.backend);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (m.ok()) out.model = std::move(m).value();
  return out;
}

std::vector<int32_t> ids_of(const Model& m, int64_t n) {
  std::vector<int32_t> ids;
  uint32_t x = 12345u;
  while (static_cast<int64_t>(ids.size()) < n) {
    x = x * 1103515245u + 12345u;
    const int32_t id = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(m.info().vocab_size));
    if (id != m.info().image_token_id) ids.push_back(id);
  }
  return ids;
}

// Rows [pos0, pos0 + n) of the script, logits of the last, keeping each multiple of 64's state.
ForwardBatch rows(const std::vector<int32_t>& script, int64_t pos0, int64_t n) {
  ForwardBatch b;
  for (int64_t i = 0; i < n; ++i) {
    b.token_ids.push_back(script[static_cast<size_t>(pos0 + i)]);
    b.positions.push_back(static_cast<int32_t>(pos0 + i));
  }
  b.logit_rows = {static_cast<int32_t>(n - 1)};
  b.keep_block_states = true;
  return b;
}

// Every layer's window and state in one slot of the pool.
std::vector<uint8_t> slot_bytes(Backend& be, const StatePool& pool, int32_t slot) {
  std::vector<uint8_t> out;
  for (size_t l = 0; l < pool.n_layers(); ++l)
    for (const Tensor& t : {pool.window(l, slot), pool.state(l, slot)}) {
      std::vector<uint8_t> part(t.nbytes());
      if (!part.empty()) be.download(t, part.data());
      out.insert(out.end(), part.begin(), part.end());
    }
  return out;
}

const SnapshotSlot* snap_of(const CacheBlock& b) { return dynamic_cast<const SnapshotSlot*>(b.state.get()); }

TEST(SnapshotSlots, SnapshotHoldsAPoolSlotUntilItsBlockIsEvicted) {
  Loaded L = load();
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  ASSERT_TRUE(m.set_state_slots(3).ok());  // one sequence and two snapshots
  const std::vector<int32_t> script = ids_of(m, kPrompt);
  auto a = m.new_cache(kPrompt + 8);
  ASSERT_TRUE(m.begin_prompt(*a, script, {}).ok());
  ASSERT_TRUE(m.forward(rows(script, 0, kPrompt), *a).ok());
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 2);

  auto b0 = m.snapshot(*a, 0, 64);
  ASSERT_TRUE(b0.ok()) << b0.error().message;
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 1) << "a snapshot takes a slot of the pool";
  ASSERT_NE(snap_of(*b0), nullptr);
  EXPECT_TRUE(b0->tensors.empty()) << "no copy of the state outside the pool";
  EXPECT_EQ(b0->nbytes(), 0u);
  auto b1 = m.snapshot(*a, 64, 128);
  ASSERT_TRUE(b1.ok()) << b1.error().message;
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 0);
  const int32_t own = dynamic_cast<qwen3_5::Qwen35Cache&>(*a).slot.id();
  EXPECT_NE(snap_of(*b0)->slot, own);
  EXPECT_NE(snap_of(*b1)->slot, own);
  EXPECT_NE(snap_of(*b0)->slot, snap_of(*b1)->slot);

  // No free slot: refused, nothing taken (K/V block references included).
  const int64_t kv_free = m.kv_pool_stats().free;
  auto b2 = m.snapshot(*a, 128, kPrompt);
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(b2.error().message.find("no free slot"), std::string::npos) << b2.error().message;
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 0);
  EXPECT_EQ(m.kv_pool_stats().free, kv_free);

  // In the prompt cache: outside its byte budget, counted as state slots; eviction frees them.
  PrefixCache pc(1 << 20);
  const std::vector<std::string> keys = prompt_block_keys(script, -1, {});
  ASSERT_EQ(keys.size(), 2u);
  ASSERT_TRUE(pc.insert(keys, 0, std::move(b0).value()));
  ASSERT_TRUE(pc.insert(keys, 1, std::move(b1).value()));
  EXPECT_EQ(pc.bytes(), 0u);
  EXPECT_EQ(pc.n_state_slots(), 2u);
  EXPECT_FALSE(pc.evict_lru_state(keys, 2)) << "block 1 is the parent of the block to insert: kept";
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 0);
  EXPECT_TRUE(pc.evict_lru_state());
  EXPECT_EQ(pc.n_state_slots(), 1u);
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 1) << "evicting a block returns its slot";
  EXPECT_TRUE(pc.evict_lru_shared());
  EXPECT_EQ(pc.n_state_slots(), 0u);
  EXPECT_EQ(pc.n_blocks(), 0u);
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 2);
  a.reset();
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 3);
}

TEST(SnapshotSlots, RestoreCopiesTheSnapshotSlotAndEqualsFresh) {
  Loaded L = load();
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  ASSERT_TRUE(m.set_state_slots(4).ok());
  const std::vector<int32_t> script = ids_of(m, kPrompt + 4);
  const std::vector<int32_t> prompt(script.begin(), script.begin() + kPrompt);
  const int64_t V = m.info().vocab_size;
  auto a = m.new_cache(kPrompt + 8);
  ASSERT_TRUE(m.begin_prompt(*a, prompt, {}).ok());
  auto la = m.forward(rows(script, 0, kPrompt), *a);
  ASSERT_TRUE(la.ok());
  auto b0 = m.snapshot(*a, 0, 64), b1 = m.snapshot(*a, 64, 128);
  ASSERT_TRUE(b0.ok() && b1.ok());
  const StatePool& pool = *snap_of(*b1)->pool();
  const std::vector<uint8_t> snap_before = slot_bytes(m.backend(), pool, snap_of(*b1)->slot);

  auto r = m.new_cache(kPrompt + 8);
  ASSERT_TRUE(m.begin_prompt(*r, prompt, {}).ok());
  ASSERT_TRUE(m.restore(*r, {&*b0, &*b1}).ok());
  const int32_t r_slot = dynamic_cast<qwen3_5::Qwen35Cache&>(*r).slot.id();
  EXPECT_NE(r_slot, snap_of(*b1)->slot) << "the sequence runs in its own slot";
  EXPECT_EQ(slot_bytes(m.backend(), pool, r_slot), snap_before) << "restore copies the last block's slot";
  auto lr = m.forward(rows(script, 128, kPrompt - 128), *r);
  ASSERT_TRUE(lr.ok());
  EXPECT_EQ(std::memcmp(la->data(), lr->data(), static_cast<size_t>(V) * sizeof(float)), 0)
      << "resumed from a snapshot slot differs from fresh";
  for (int64_t p = kPrompt; p < kPrompt + 3; ++p) {
    ForwardBatch d = rows(script, p, 1);
    d.keep_block_states = false;
    auto xa = m.forward(d, *a), xr = m.forward(d, *r);
    ASSERT_TRUE(xa.ok() && xr.ok());
    EXPECT_EQ(std::memcmp(xa->data(), xr->data(), static_cast<size_t>(V) * sizeof(float)), 0)
        << "decode " << p;
  }
  EXPECT_NE(slot_bytes(m.backend(), pool, r_slot), snap_before) << "the sequence's state moved on";
  EXPECT_EQ(slot_bytes(m.backend(), pool, snap_of(*b1)->slot), snap_before) << "the snapshot did not";
}

}  // namespace
}  // namespace tf
