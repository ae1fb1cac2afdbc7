// The engine over Qwen3.5's state pool (issue 15): with fewer state slots than sequences allowed in
// flight, the sequences that find no slot are preempted (or wait) and recomputed, and every request
// still finishes with exactly the output it has alone; afterwards every slot is free again. The prompt
// cache's snapshots share the pool: with few slots, running sequences still get theirs (snapshots
// are evicted or not taken), outputs stay those of solo runs, and every slot is free or a snapshot.
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace tf {
namespace {

using namespace tf::enginetest;

std::unique_ptr<Engine> make_engine(int parallel, int64_t state_slots, double cache_mb = 0,
                                    int64_t snapshot_slots = -1) {
  EngineOptions o = engine_options(ckpt("qwen3_5-tiny-bf16"), parallel);
  o.cache_mb = cache_mb;
  o.snapshot_slots = snapshot_slots;
  o.state_slots = state_slots;
  return create_engine(o);
}

GenerationRequest request(int64_t n, int64_t max_tokens, uint32_t prompt_seed, uint64_t seed, bool drafts) {
  return token_request("slots-test", n, max_tokens, prompt_seed, seed, drafts);
}

TEST(StateSlotsEngine, FewerSlotsThanSequencesFinishAsTheyDoAlone) {
  auto solo = make_engine(1, 0), tight = make_engine(6, 2);
  ASSERT_TRUE(solo && tight);
  std::vector<GenerationRequest> requests;
  for (uint32_t i = 0; i < 6; ++i)
    requests.push_back(request(40 + 13 * i, 24, i, i % 2 ? 5 + i : 0, i % 3 != 0));
  ASSERT_NO_FATAL_FAILURE(expect_together_as_alone(*solo, *tight, requests));
  EXPECT_GT(metric(*tight, "tensorfold_preemptions_total"), 0)
      << "the slots never ran out: the test tests nothing";
  EXPECT_TRUE(metrics_reach(*tight, "tensorfold_state_slots{state=\"total\"} 2\n")) << tight->metrics_text();
  EXPECT_TRUE(metrics_reach(*tight, "tensorfold_state_slots{state=\"free\"} 2\n")) << tight->metrics_text();
  // The default: one slot per sequence in flight.
  EXPECT_TRUE(metrics_reach(*solo, "tensorfold_state_slots{state=\"total\"} 1\n")) << solo->metrics_text();
}

// A shared prefix of 200 tokens (three blocks to cache) and a tail of its own.
GenerationRequest prefixed(uint32_t i, int64_t max_tokens) {
  GenerationRequest r = request(200, max_tokens, 99, i % 2 ? 7 + i : 0, false);
  const GenerationRequest tail = request(10 + 7 * i, 1, 1000 + i, 0, false);
  std::vector<int32_t> ids = *r.prompt_ids;
  ids.insert(ids.end(), tail.prompt_ids->begin(), tail.prompt_ids->end());
  r.prompt_ids = ids;
  return r;
}

TEST(StateSlotsEngine, SnapshotsYieldSlotsToRunningSequences) {
  // Three slots (two for sequences, one more for snapshots), four sequences in flight: running
  // sequences evict snapshots for their slots, and snapshots find few free.
  auto solo = make_engine(1, 0), tight = make_engine(4, 2, 4.0, 1);
  ASSERT_TRUE(solo && tight);
  std::vector<Outcome> want;
  for (uint32_t i = 0; i < 6; ++i) want.push_back(drain(*solo->submit(prefixed(i, 12))));
  // The first alone: it leaves its prompt's blocks cached, one snapshot slot each while slots last.
  const Outcome first = drain(*tight->submit(prefixed(0, 12)));
  ASSERT_TRUE(first.error.empty()) << first.error;
  EXPECT_EQ(first.ids, want[0].ids);
  EXPECT_TRUE(metrics_reach(*tight, "tensorfold_state_slots{state=\"total\"} 3\n")) << tight->metrics_text();
  EXPECT_GE(metric(*tight, "tensorfold_state_slots{state=\"prompt_cache\"}"), 1) << tight->metrics_text();
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (uint32_t i = 1; i < 6; ++i) chans.push_back(tight->submit(prefixed(i, 12)));
  for (size_t i = 0; i < chans.size(); ++i) {
    const Outcome o = drain(*chans[i]);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.ids, want[i + 1].ids) << "request " << i + 1;
    EXPECT_EQ(o.logprobs, want[i + 1].logprobs) << "request " << i + 1;
    EXPECT_EQ(o.reason, "length");
  }
  EXPECT_GT(metric(*tight, "tensorfold_prompt_cache_hits_total"), 0) << tight->metrics_text();
  // Idle: every slot is free or holds a cached block's snapshot.
  bool settled = false;
  for (int i = 0; i < 200 && !settled; ++i) {
    settled = metric(*tight, "tensorfold_state_slots{state=\"free\"}") +
                  metric(*tight, "tensorfold_state_slots{state=\"prompt_cache\"}") ==
              3;
    if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(settled) << tight->metrics_text();
  EXPECT_LE(metric(*tight, "tensorfold_state_slots{state=\"prompt_cache\"}"),
            metric(*tight, "tensorfold_prompt_cache_blocks"));
}

}  // namespace
}  // namespace tf
