// The engine over Qwen3.5's state pool (issue 15): with fewer state slots than sequences allowed in
// flight, the sequences that find no slot are preempted (or wait) and recomputed, and every request
// still finishes with exactly the output it has alone; afterwards every slot is free again. The prompt
// cache's snapshots share the pool: with few slots, running sequences still get theirs (snapshots
// are evicted or not taken), outputs stay those of solo runs, and every slot is free or a snapshot.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "runtime/engine.h"
#include "test_pipeline.h"

namespace tf {
namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::string error, reason;
};

Outcome drain(RequestChannel& ch) {
  Outcome o;
  for (;;) {
    auto e = ch.pop(120000);
    if (!e) {
      o.error = "timeout";
      return o;
    }
    if (e->kind == EngineEvent::Kind::Token && e->token >= 0) {
      o.ids.push_back(e->token);
      if (e->logprob) o.logprobs.push_back(e->logprob->logprob);
    } else if (e->kind == EngineEvent::Kind::Finished) {
      o.reason = e->finish_reason;
      return o;
    } else if (e->kind == EngineEvent::Kind::Error) {
      o.error = e->message;
      return o;
    }
  }
}

std::unique_ptr<Engine> make_engine(int parallel, int64_t state_slots, double cache_mb = 0,
                                    int64_t snapshot_slots = -1) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/qwen3_5-tiny-bf16";
  o.parallel = parallel;
  o.prefill_chunk = 64;
  o.cache_mb = cache_mb;
  o.snapshot_slots = snapshot_slots;
  o.state_slots = state_slots;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(e).value() : nullptr;
}

GenerationRequest request(int64_t n, int64_t max_tokens, uint32_t prompt_seed, uint64_t seed, bool drafts) {
  GenerationRequest r;
  r.id = "slots-test";
  std::mt19937 rng(prompt_seed);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(100 + rng() % 500));
  r.prompt_ids = ids;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.logprobs = true;
  r.use_drafts = drafts;
  if (seed == 0) {
    r.sampling.temperature = 0.0f;
    r.sampling_given.temperature = true;
  } else {
    r.sampling = SamplingParams{0.9f, 0.95f, 40, seed};
    r.sampling_given = {true, true, true, true};
  }
  return r;
}

int64_t metric(const Engine& e, const std::string& line_prefix) {
  const std::string text = e.metrics_text(), key = "\n" + line_prefix + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
}

// True once the metrics text holds `line` (a finished sequence's cache goes right after its last step).
bool metrics_reach(const Engine& e, const std::string& line) {
  for (int i = 0; i < 200; ++i) {
    if (e.metrics_text().find(line) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(StateSlotsEngine, FewerSlotsThanSequencesFinishAsTheyDoAlone) {
  auto solo = make_engine(1, 0), tight = make_engine(6, 2);
  ASSERT_TRUE(solo && tight);
  std::vector<Outcome> want;
  for (uint32_t i = 0; i < 6; ++i)
    want.push_back(drain(*solo->submit(request(40 + 13 * i, 24, i, i % 2 ? 5 + i : 0, i % 3 != 0))));
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (uint32_t i = 0; i < 6; ++i)
    chans.push_back(tight->submit(request(40 + 13 * i, 24, i, i % 2 ? 5 + i : 0, i % 3 != 0)));
  for (size_t i = 0; i < chans.size(); ++i) {
    const Outcome o = drain(*chans[i]);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.ids, want[i].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(o.reason, "length");
  }
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
