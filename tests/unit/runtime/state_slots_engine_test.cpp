// The engine over Qwen3.5's state pool (issue 15): with fewer state slots than sequences allowed in
// flight, the sequences that find no slot are preempted (or wait) and recomputed, and every request
// still finishes with exactly the output it has alone; afterwards every slot is free again.
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace tf {
namespace {

using namespace tf::enginetest;

std::unique_ptr<Engine> make_engine(int parallel, int64_t state_slots) {
  EngineOptions o = engine_options(ckpt("qwen3_5-tiny-bf16"), parallel);
  o.cache_mb = 0;
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

}  // namespace
}  // namespace tf
