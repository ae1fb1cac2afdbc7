// Helpers for the engine tests over the tiny oracle checkpoints: building an engine, draining a
// request's events, token-id prompts, and reading the metrics text.
#pragma once
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "test_pipeline.h"

namespace tf::enginetest {

inline const std::string kGolden = std::string(TF_SOURCE_DIR) + "/tests/golden";

// A checkpoint directory: a name under tests/golden/ckpt, or a path.
inline std::string ckpt(const std::string& name_or_path) {
  return name_or_path.find('/') == std::string::npos ? kGolden + "/ckpt/" + name_or_path : name_or_path;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The fields every engine test sets; the caller adds the rest (pools, caches, drafts).
inline EngineOptions engine_options(const std::string& checkpoint, int parallel) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = checkpoint;
  o.parallel = parallel;
  o.prefill_chunk = 64;
  return o;
}

// The engine, or null after a test failure that says why.
inline std::unique_ptr<Engine> create_engine(const EngineOptions& o) {
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(e).value() : nullptr;
}

struct Outcome {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;  // each token's logprob, then its top (id, logprob) pairs when asked for
  int64_t cached = -1;          // usage.cached_tokens of the finish event
  std::string error, reason;
};

// A request's events until it finishes, fails, or sends nothing for two minutes.
inline Outcome drain(RequestChannel& ch) {
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
      for (const auto& t : e->top_logprobs) {
        o.logprobs.push_back(static_cast<float>(t.id));
        o.logprobs.push_back(t.logprob);
      }
    } else if (e->kind == EngineEvent::Kind::Finished) {
      o.reason = e->finish_reason;
      o.cached = e->usage.cached_tokens;
      return o;
    } else if (e->kind == EngineEvent::Kind::Error) {
      o.error = e->message;
      return o;
    }
  }
}

// Greedy when sampled.seed is 0 (only the temperature given), else `sampled` with every field given.
inline void set_sampling(GenerationRequest& r, const SamplingParams& sampled) {
  if (sampled.seed == 0) {
    r.sampling.temperature = 0.0f;
    r.sampling_given.temperature = true;
  } else {
    r.sampling = sampled;
    r.sampling_given = {true, true, true, true};
  }
}

// A token-id prompt of n ids (seeded), max_tokens out, with logprobs; greedy (seed 0) or seeded sampling.
inline GenerationRequest token_request(const std::string& id, int64_t n, int64_t max_tokens,
                                       uint32_t prompt_seed, uint64_t seed, bool drafts) {
  GenerationRequest r;
  r.id = id;
  std::mt19937 rng(prompt_seed);
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(100 + rng() % 500));
  r.prompt_ids = ids;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.logprobs = true;
  r.use_drafts = drafts;
  set_sampling(r, SamplingParams{0.9f, 0.95f, 40, seed});
  return r;
}

// The value of the metrics line `name <value>`, -1 when there is none.
inline int64_t metric(const Engine& e, const std::string& name) {
  const std::string text = e.metrics_text(), key = "\n" + name + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + key.size()));
}

// True once the metrics text holds `line` (the engine frees a finished sequence's blocks and slot
// right after the step that sent its last event, so a client may look a moment before).
inline bool metrics_reach(const Engine& e, const std::string& line) {
  for (int i = 0; i < 200; ++i) {
    if (e.metrics_text().find(line) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Runs each request alone on `solo`, then all of them at once on `tight`: every one finishes by length
// with the ids and logprobs it has alone (call it inside ASSERT_NO_FATAL_FAILURE).
inline void expect_together_as_alone(Engine& solo, Engine& tight,
                                     const std::vector<GenerationRequest>& requests) {
  std::vector<Outcome> want;
  for (const GenerationRequest& r : requests) want.push_back(drain(*solo.submit(r)));
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (const GenerationRequest& r : requests) chans.push_back(tight.submit(r));
  for (size_t i = 0; i < chans.size(); ++i) {
    const Outcome o = drain(*chans[i]);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.ids, want[i].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(o.reason, "length");
  }
}

// A gtest name: every character but letters and digits becomes '_'.
inline std::string test_name(std::string s) {
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Test names for the checkpoints' directory names ("lighton_ocr-tiny-bf16" -> "lighton_ocr_tiny_bf16").
inline std::string ckpt_param_name(const ::testing::TestParamInfo<std::string>& i) {
  return test_name(i.param);
}

}  // namespace tf::enginetest
