// Qwen3.5's state pool (issue 15) and the batched conv / delta rule over it (issue 17), on the committed
// tiny checkpoint (CPU in CI; TF_TEST_BACKEND=cuda on a GPU machine): a sequence's logits are bit for
// bit the same whichever pool slot it holds (the first, one inside, the last) and with 1, 7 or 63 other
// sequences in its steps; a planted wrong slot mapping (two segments' slots exchanged inside the
// batched ops) makes the same check fail; and the slots are accounted for: one per live cache, all
// free when the caches end, an exhausted pool refused by reserve() and forward_step without changing
// anything, and the pool sized only before its first sequence.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/ops.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/qwen3_5/model.h"
#include "models/registry.h"
#include "planted_linear_backend.h"

namespace tf {
namespace {

constexpr int kPrompt = 150;  // three chunks of 64 and a part: chunk boundaries inside the prompt

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<PlantedLinearBackend> planted;
  std::unique_ptr<Model> model;
};

Loaded load(bool swap_slots = false) {
  const std::string dir = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/qwen3_5-tiny-bf16";
  Loaded out;
  auto be = create_backend(test_backend_name());
  EXPECT_TRUE(be.ok());
  out.backend = std::move(be).value();
  if (swap_slots) {
    out.planted = std::make_unique<PlantedLinearBackend>(*out.backend);
    out.planted->plant_linear = false;
    out.planted->swap_slots = true;
  }
  auto cfg = JsonConfig::load(dir + "/config.json");
  auto wm = WeightMap::open(dir);
  EXPECT_TRUE(cfg.ok() && wm.ok()) << dir;
  auto m = load_model(*cfg, std::move(wm).value(),
                      swap_slots ? static_cast<Backend&>(*out.planted) : *out.backend);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  if (m.ok()) out.model = std::move(m).value();
  return out;
}

std::vector<int32_t> ids_of(const Model& m, int n, uint32_t seed) {
  std::vector<int32_t> ids;
  uint32_t x = seed * 2654435761u + 7u;
  while (static_cast<int>(ids.size()) < n) {
    x = x * 1103515245u + 12345u;
    const int32_t id = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(m.info().vocab_size));
    if (id != m.info().image_token_id) ids.push_back(id);
  }
  return ids;
}

ForwardBatch rows(const std::vector<int32_t>& script, int64_t pos0, int64_t n, bool decode_rows = false) {
  ForwardBatch b;
  for (int64_t i = 0; i < n; ++i) {
    b.token_ids.push_back(script[static_cast<size_t>(pos0 + i)]);
    b.positions.push_back(static_cast<int32_t>(pos0 + i));
    b.logit_rows.push_back(static_cast<int32_t>(i));
  }
  b.decode_rows = decode_rows;
  return b;
}

// Another sequence in the steps: its own prompt prefilled in pieces, then decodes and verifications.
struct Other {
  std::unique_ptr<SequenceCache> cache;
  std::vector<int32_t> script;
  int64_t prompt = 0, n_past = 0;
};

// The target's script (prompt in chunks of 64, three decodes, a 4-row verification rolled back to 2
// rows, a decode, a 3-row verification, a decode), `n_others` others in every step, the target the
// segment at index `seg` and holding pool slot `hold`.
std::vector<std::vector<float>> run(Model& m, int hold, int n_others, int seg) {
  std::vector<std::vector<float>> logits;
  const int64_t V = m.info().vocab_size;
  const std::vector<int32_t> script = ids_of(m, kPrompt + 16, 11);
  // Caches are made (and held) until one holds slot `hold` (every slot is free when run starts).
  auto slot_of = [](SequenceCache& c) { return dynamic_cast<qwen3_5::Qwen35Cache&>(c).slot.id(); };
  std::vector<std::unique_ptr<SequenceCache>> held;
  auto cache = m.new_cache(kPrompt + 16);
  while (slot_of(*cache) != hold && slot_of(*cache) >= 0) {
    held.push_back(std::move(cache));
    cache = m.new_cache(kPrompt + 16);
  }
  EXPECT_EQ(slot_of(*cache), hold) << "the test's premise";
  EXPECT_TRUE(
      m.begin_prompt(*cache, std::vector<int32_t>(script.begin(), script.begin() + kPrompt), {}).ok());
  held.clear();  // the held slots go back: others (made next) take them
  std::vector<Other> others(static_cast<size_t>(n_others));
  for (int j = 0; j < n_others; ++j) {
    Other& o = others[static_cast<size_t>(j)];
    o.prompt = 3 + (j * 17) % 40;
    o.script = ids_of(m, static_cast<int>(o.prompt) + 40, 100u + static_cast<uint32_t>(j));
    o.cache = m.new_cache(o.prompt + 40);
    EXPECT_TRUE(
        m.begin_prompt(*o.cache, std::vector<int32_t>(o.script.begin(), o.script.begin() + o.prompt), {})
            .ok());
  }
  struct Act {
    int64_t pos0, n;
    bool verify;
    int64_t keep;
  };
  std::vector<Act> acts;
  for (int64_t p = 0; p < kPrompt; p += 64)
    acts.push_back({p, std::min<int64_t>(64, kPrompt - p), false, -1});
  const int64_t P = kPrompt;
  for (int64_t p : {P, P + 1, P + 2}) acts.push_back({p, 1, false, -1});
  acts.push_back({P + 3, 4, true, P + 5});
  acts.push_back({P + 5, 1, false, -1});
  acts.push_back({P + 6, 3, true, -1});
  acts.push_back({P + 9, 1, false, -1});
  for (size_t step = 0; step < acts.size(); ++step) {
    std::vector<ForwardBatch> batches;
    batches.reserve(others.size() + 1);
    std::vector<Segment> segs;
    std::vector<int64_t> verify_keep(others.size(), -1);
    int64_t row0 = 0;
    size_t o = 0;
    for (int s = 0; s <= n_others; ++s) {
      if (s == seg) {
        batches.push_back(rows(script, acts[step].pos0, acts[step].n, acts[step].verify));
        segs.push_back({&batches.back(), cache.get()});
        continue;
      }
      Other& ot = others[o];
      const int64_t left = ot.prompt - ot.n_past;
      const bool verify = left <= 0 && (step + o) % 3 == 1;
      const int64_t n = left > 0 ? std::min<int64_t>(left, 5 + static_cast<int64_t>(o % 7)) : verify ? 3 : 1;
      batches.push_back(rows(ot.script, ot.n_past, n, verify));
      segs.push_back({&batches.back(), ot.cache.get()});
      if (verify) verify_keep[o] = ot.n_past + 1 + static_cast<int64_t>(step % 3);
      ot.n_past += n;
      if (s < seg) row0 += n;
      ++o;
    }
    auto lg = m.forward_step(segs);
    EXPECT_TRUE(lg.ok()) << (lg.ok() ? "" : lg.error().message);
    if (!lg.ok()) return logits;
    for (int64_t i = 0; i < acts[step].n; ++i)
      logits.emplace_back(lg->as<float>() + (row0 + i) * V, lg->as<float>() + (row0 + i + 1) * V);
    if (acts[step].keep >= 0) {
      EXPECT_TRUE(m.rollback(*cache, acts[step].keep).ok());
    }
    for (size_t j = 0; j < others.size(); ++j)
      if (verify_keep[j] >= 0) {
        EXPECT_TRUE(m.rollback(*others[j].cache, verify_keep[j]).ok());
        others[j].n_past = verify_keep[j];
      }
  }
  return logits;
}

int differing(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  int bad = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    bad += a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float));
  return bad;
}

TEST(StateSlots, LogitsEqualAtAnySlotAndAmongOthers) {
  Loaded L = load();
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  ASSERT_EQ(m.kv_pool_stats().state_slots, 64);  // the default pool (no set_state_slots)
  const auto ref = run(m, 0, 0, 0);
  ASSERT_EQ(ref.size(), static_cast<size_t>(kPrompt + 12));
  EXPECT_EQ(differing(ref, run(m, 37, 0, 0)), 0) << "slot 37, alone";
  EXPECT_EQ(differing(ref, run(m, 63, 0, 0)), 0) << "slot 63 (the last), alone";
  EXPECT_EQ(differing(ref, run(m, 5, 1, 1)), 0) << "slot 5, 1 other";
  EXPECT_EQ(differing(ref, run(m, 63, 7, 3)), 0) << "slot 63, 7 others";
  EXPECT_EQ(differing(ref, run(m, 20, 63, 63)), 0) << "slot 20, 63 others, last segment";
  EXPECT_EQ(differing(ref, run(m, 0, 63, 0)), 0) << "slot 0, 63 others, first segment";
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 64) << "every slot is free once the caches are gone";
}

TEST(StateSlots, PlantedWrongSlotMappingIsCaught) {
  Loaded L = load(/*swap_slots=*/true);
  ASSERT_TRUE(L.model);
  const auto ref = run(*L.model, 0, 0, 0);
  EXPECT_EQ(L.planted->n_swapped, 0) << "a step of one segment has nothing to exchange";
  const auto got = run(*L.model, 0, 1, 0);
  EXPECT_GT(L.planted->n_swapped, 0);
  EXPECT_GT(differing(ref, got), 0) << "the invariance check misses a wrong slot mapping";
}

TEST(StateSlots, ExhaustedPoolIsRefusedWithoutChangingAnything) {
  Loaded L = load();
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  ASSERT_TRUE(m.set_state_slots(2).ok());
  const std::vector<int32_t> script = ids_of(m, 40, 5);
  const std::vector<int32_t> prompt(script.begin(), script.begin() + 30);
  auto a = m.new_cache(40), b = m.new_cache(40), c = m.new_cache(40);
  EXPECT_EQ(m.kv_pool_stats().state_slots, 2);
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 0);
  EXPECT_FALSE(m.set_state_slots(8).ok()) << "the pool is sized before its first sequence only";
  for (auto* x : {a.get(), b.get(), c.get()}) ASSERT_TRUE(m.begin_prompt(*x, prompt, {}).ok());
  auto la = m.forward(rows(script, 0, 30), *a);
  ASSERT_TRUE(la.ok());
  EXPECT_FALSE(m.reserve(*c, 30)) << "no slot left for c";
  const ForwardBatch bc = rows(script, 0, 30);
  auto refused = m.forward(bc, *c);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("state pool"), std::string::npos) << refused.error().message;
  // A step holding a good segment and the slotless one changes neither.
  const ForwardBatch bb = rows(script, 0, 30);
  const Segment both[] = {{&bb, b.get()}, {&bc, c.get()}};
  EXPECT_FALSE(m.forward_step(both).ok());
  auto lb = m.forward(bb, *b);  // b from its start: nothing of the failed step stayed
  ASSERT_TRUE(lb.ok());
  EXPECT_EQ(std::memcmp(la->data(), lb->data(), la->nbytes()), 0);
  a.reset();  // a's slot goes back: c gets it, starting from zeros whatever a left there
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 1);
  EXPECT_TRUE(m.reserve(*c, 30));
  auto lc = m.forward(bc, *c);
  ASSERT_TRUE(lc.ok()) << lc.error().message;
  EXPECT_EQ(std::memcmp(la->data(), lc->data(), la->nbytes()), 0);
  b.reset();
  c.reset();
  EXPECT_EQ(m.kv_pool_stats().state_slots_free, 2);
}

}  // namespace
}  // namespace tf
