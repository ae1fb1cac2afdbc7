// The recorded decode steps of both families (models/lighton_ocr/text.cpp and models/qwen3_5/decode_graph.cpp
// decode_graph_step), run in CI through RecordingBackend over the test backend: steps whose segments are one
// row each are recorded once per (bucket, output) and replayed (LightOnOCR pads to a power of two; Qwen3.5
// records each row count: its recurrent state slots leave no room for padding rows). Every sequence's logits
// and greedy ids must equal the same sequence decoded alone, op by op, on the plain backend, bit for bit:
// five sequences (bucket 8), three (bucket 4) and one (bucket 1), decoding across a 64-position block
// boundary, with the three outputs (f32 logits, device argmax, device sampling with per-row parameters
// and logprobs: the sample op reads them from the graph's input arena), and capacities that give two
// block-table widths (each recorded apart, on the bucket's shared buffers). No allocation or copy may happen
// during a capture. Planted control: a linear whose bits depend on the row count, under the recorder, must
// make the comparison fail (the padded bucket has more rows than the solo step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/test_hooks.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/registry.h"
#include "planted_linear_backend.h"
#include "recording_backend.h"

namespace tf {
namespace {

const char* kCheckpoints[] = {"tests/golden/ckpt/lighton_ocr-tiny-bf16",
                              "tests/golden/ckpt/lighton_ocr-tiny-fp32",
                              "tests/golden/ckpt/qwen3_5-tiny-bf16", "tests/golden/ckpt/qwen3_5-tiny-fp32"};
constexpr int kSeqs = 5, kSteps = 9;

std::unique_ptr<Model> load_on(const std::string& rel, Backend& be) {
  const std::string dir = std::string(TF_SOURCE_DIR) + "/" + rel;
  auto cfg = JsonConfig::load(dir + "/config.json");
  auto wm = WeightMap::open(dir);
  EXPECT_TRUE(cfg.ok() && wm.ok()) << dir;
  if (!cfg.ok() || !wm.ok()) return nullptr;
  auto m = load_model(*cfg, std::move(wm).value(), be);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return m.ok() ? std::move(m).value() : nullptr;
}

int32_t token(const Model& m, int seq, int pos) {
  const int64_t vocab = m.info().vocab_size;
  int32_t id = static_cast<int32_t>((pos * 7919 + seq * 104729 + 13) % vocab);
  if (id == m.info().image_token_id) id = (id + 1) % static_cast<int32_t>(vocab);
  return id;
}

// Sequence j's prompt: 58 + 3j tokens, so the decodes cross position 64 at different steps.
int prompt_len(int j) { return 58 + 3 * j; }

// Sampled steps: each sequence its own parameters (odd ones ask for 3 top logprobs).
SampleRow sampling_of(int seq, int pos) {
  SampleRow r;
  r.temperature = 0.7f + 0.1f * static_cast<float>(seq);
  r.top_p = seq % 3 ? 0.9f : 1.0f;
  r.top_k = seq % 2 ? 20 : 0;
  r.n_logprobs = seq % 2 ? 3 : -1;
  r.seed = static_cast<uint64_t>(seq) + 11;
  r.position = static_cast<uint64_t>(pos);
  return r;
}

ForwardBatch one_row(const Model& m, int seq, int pos, StepOutput out) {
  ForwardBatch b;
  b.token_ids = {token(m, seq, pos)};
  b.positions = {pos};
  b.logit_rows = {0};
  if (out == StepOutput::kSampled) b.sample = {sampling_of(seq, pos)};
  return b;
}

struct DecodeRun {
  std::vector<std::vector<float>> logits;  // per (step, sequence) in order
  std::vector<int32_t> ids;                // argmax steps, then sampled steps' records (id [, logprobs])
};

// Prefills each sequence alone, then decodes: steps of `group` sequences together (group 1: each alone),
// the steps asking in turn for logits, argmax ids and sampled records.
DecodeRun decode(Model& m, int n_seqs, int group) {
  DecodeRun r;
  const int64_t V = m.info().vocab_size;
  std::vector<std::unique_ptr<SequenceCache>> caches;
  for (int j = 0; j < n_seqs; ++j) {
    caches.push_back(m.new_cache(j % 2 ? 1024 : 256));  // two block-table widths share a bucket's buffers
    ForwardBatch b;
    for (int p = 0; p < prompt_len(j); ++p) {
      b.token_ids.push_back(token(m, j, p));
      b.positions.push_back(p);
    }
    EXPECT_TRUE(m.begin_prompt(*caches.back(), b.token_ids, {}).ok());  // Qwen3.5 plans M-RoPE here
    b.logit_rows = {static_cast<int32_t>(prompt_len(j) - 1)};
    EXPECT_TRUE(m.forward(b, *caches.back()).ok());
  }
  for (int step = 0; step < kSteps; ++step) {
    const StepOutput out = step % 3 == 0   ? StepOutput::kLogits
                           : step % 3 == 1 ? StepOutput::kArgmax
                                           : StepOutput::kSampled;
    for (int j0 = 0; j0 < n_seqs; j0 += group) {
      std::vector<ForwardBatch> batches;
      std::vector<Segment> segs;
      const int j1 = std::min(n_seqs, j0 + group);
      batches.reserve(static_cast<size_t>(j1 - j0));
      for (int j = j0; j < j1; ++j) {
        batches.push_back(one_row(m, j, prompt_len(j) + step, out));
        segs.push_back({&batches.back(), caches[static_cast<size_t>(j)].get()});
      }
      auto res = m.forward_step(segs, out);
      EXPECT_TRUE(res.ok()) << (res.ok() ? "" : res.error().message);
      if (!res.ok()) return r;
      for (int i = 0; i < j1 - j0; ++i) {
        if (out == StepOutput::kLogits) {
          r.logits.emplace_back(res->as<float>() + i * V, res->as<float>() + (i + 1) * V);
        } else if (out == StepOutput::kArgmax) {
          r.ids.push_back(res->as<int32_t>()[i]);
        } else {  // the record's meaningful columns (the graph's records are wider)
          const int32_t* rec = res->as<int32_t>() + i * res->shape()[1];
          r.ids.insert(r.ids.end(), rec,
                       rec + (batches[static_cast<size_t>(i)].sample[0].n_logprobs < 0 ? 1 : 8));
        }
      }
    }
  }
  return r;
}

bool same(const DecodeRun& a, const DecodeRun& b) {
  if (a.logits.size() != b.logits.size() || a.ids != b.ids) return false;
  for (size_t i = 0; i < a.logits.size(); ++i)
    if (std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

TEST(DecodeGraph, ReplayedStepsEqualSoloOpByOp) {
  for (const char* ck : kCheckpoints) {
    SCOPED_TRACE(ck);
    auto plain = create_backend(test_backend_name());
    ASSERT_TRUE(plain.ok());
    if ((*plain)->can_capture())
      GTEST_SKIP() << "the test backend records graphs itself: covered by the model tests";
    auto solo_model = load_on(ck, **plain);
    ASSERT_TRUE(solo_model);
    const DecodeRun solo = decode(*solo_model, kSeqs, 1);
    ASSERT_EQ(solo.logits.size(), static_cast<size_t>(kSeqs * kSteps / 3));
    // Argmax ids (one per sequence and step) and sampled records, the odd sequences' with logprobs.
    ASSERT_EQ(solo.ids.size(), static_cast<size_t>(kSteps / 3 * (kSeqs + 3 * 1 + 2 * 8)));
    for (int group : {kSeqs, 3, 1}) {
      RecordingBackend rec(**plain);
      auto m = load_on(ck, rec);
      ASSERT_TRUE(m);
      const DecodeRun got = decode(*m, kSeqs, group);
      EXPECT_TRUE(same(solo, got)) << "steps of " << group << " sequences";
      EXPECT_GE(rec.captures, 3) << "one graph per (bucket, output)";
      EXPECT_GT(rec.replays, 0);
      EXPECT_EQ(rec.violations, 0) << "memory calls during a capture";
    }
  }
}

// --enforce-eager (Backend::disable_capture): nothing is recorded, and the rows are the same bits as the
// recorded steps'. On a backend that records graphs itself (CUDA) this compares its graphs with its eager
// steps; elsewhere the recording backend stands in for the graphs.
TEST(DecodeGraph, EnforceEagerRecordsNothingAndChangesNoBit) {
  for (const char* ck : kCheckpoints) {
    SCOPED_TRACE(ck);
    auto plain = create_backend(test_backend_name());
    auto eager_backend = create_backend(test_backend_name());
    ASSERT_TRUE(plain.ok() && eager_backend.ok());
    const bool records = (*plain)->can_capture();
    RecordingBackend rec(**plain), eager(**eager_backend);
    eager.disable_capture();
    EXPECT_FALSE(eager.can_capture());
    Backend& graphs = records ? static_cast<Backend&>(**plain) : static_cast<Backend&>(rec);
    auto with_graphs = load_on(ck, graphs);
    auto without = load_on(ck, eager);
    ASSERT_TRUE(with_graphs && without);
    const DecodeRun a = decode(*with_graphs, kSeqs, kSeqs), b = decode(*without, kSeqs, kSeqs);
    EXPECT_TRUE(same(a, b));
    EXPECT_EQ(eager.captures, 0);
    EXPECT_EQ(eager.replays, 0);
    if (!records) {
      EXPECT_GT(rec.replays, 0);
    }
  }
}

// Programmatic dependent launch (backend/cuda/pdl.cuh) changes when a decode step's kernels start, never what
// they compute: the same steps with it off and on (each model captures its own graphs) give the same bits.
TEST(DecodeGraph, ProgrammaticDependentLaunchChangesNoBit) {
  if (!test_hooks::set_cuda_pdl(false)) GTEST_SKIP() << "no CUDA backend in this build";
  auto backend = create_backend(test_backend_name());
  ASSERT_TRUE(backend.ok());
  if (!(*backend)->can_capture()) {
    test_hooks::set_cuda_pdl(true);
    GTEST_SKIP() << "the test backend is not CUDA";
  }
  for (const char* ck : kCheckpoints) {
    SCOPED_TRACE(ck);
    test_hooks::set_cuda_pdl(false);
    auto off = load_on(ck, **backend);
    ASSERT_TRUE(off);
    const DecodeRun a = decode(*off, kSeqs, kSeqs);
    test_hooks::set_cuda_pdl(true);
    auto on = load_on(ck, **backend);
    ASSERT_TRUE(on);
    EXPECT_TRUE(same(a, decode(*on, kSeqs, kSeqs)));
  }
  test_hooks::set_cuda_pdl(true);
}

TEST(DecodeGraph, PlantedBatchDependentLinearIsCaught) {
  auto plain = create_backend(test_backend_name());
  ASSERT_TRUE(plain.ok());
  if ((*plain)->can_capture()) GTEST_SKIP() << "the test backend records graphs itself";
  for (const char* ck : {kCheckpoints[1], kCheckpoints[2]}) {
    SCOPED_TRACE(ck);
    auto solo_model = load_on(ck, **plain);
    ASSERT_TRUE(solo_model);
    const DecodeRun solo = decode(*solo_model, kSeqs, 1);
    PlantedLinearBackend planted(**plain);
    RecordingBackend rec(planted);
    auto m = load_on(ck, rec);
    ASSERT_TRUE(m);
    EXPECT_FALSE(same(solo, decode(*m, kSeqs, kSeqs)));
    EXPECT_GT(planted.n_planted, 0);
    EXPECT_GT(rec.replays, 0);
  }
}

}  // namespace
}  // namespace tf
