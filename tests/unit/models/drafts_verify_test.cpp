// Draft verification at the model level (CPU backend, committed tiny checkpoints and the demo):
// a decode_rows forward over k + 1 rows gives every row the logits one-token decoding gives it,
// bit for bit, and rollback() returns the cache to exactly the state plain decoding reaches
// (attention K/V, Gated DeltaNet conv windows and delta-rule states, and the MTP layer's K/V).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/ops.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/lighton_ocr/model.h"
#include "models/qwen3_5/model.h"
#include "models/registry.h"
#include "planted_linear_backend.h"

namespace tf {
namespace {

struct Loaded {
  std::unique_ptr<Backend> backend, planted;
  std::unique_ptr<Model> model;
};

// planted: the model runs on a PlantedLinearBackend over the test backend (a linear whose sums depend on
// the row count).
Loaded load(const std::string& rel, bool planted = false) {
  const std::string dir = std::string(TF_SOURCE_DIR) + "/" + rel;
  Loaded out;
  auto be = create_backend(test_backend_name());
  EXPECT_TRUE(be.ok());
  out.backend = std::move(be).value();
  if (planted) out.planted = std::make_unique<PlantedLinearBackend>(*out.backend);
  auto cfg = JsonConfig::load(dir + "/config.json");
  EXPECT_TRUE(cfg.ok()) << dir;
  auto wm = WeightMap::open(dir);
  EXPECT_TRUE(wm.ok()) << dir;
  auto m = load_model(*cfg, std::move(wm).value(), planted ? *out.planted : *out.backend);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  out.model = std::move(m).value();
  return out;
}

// A fixed pseudo-random text prompt (no image placeholders).
std::vector<int32_t> prompt_ids(const Model& m, int n) {
  std::vector<int32_t> ids;
  uint32_t x = 12345;
  const int64_t vocab = m.info().vocab_size;
  while (static_cast<int>(ids.size()) < n) {
    x = x * 1103515245u + 12345u;
    const int32_t id = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab));
    if (id != m.info().image_token_id) ids.push_back(id);
  }
  return ids;
}

std::vector<uint8_t> bytes_of(Backend& b, const Tensor& t) {
  std::vector<uint8_t> v(t.nbytes());
  b.download(t, v.data());
  return v;
}

// Everything plain decoding's next steps read from the cache over positions [0, n_pos).
std::vector<std::vector<uint8_t>> state_of(Model& m, SequenceCache& c, int64_t n_pos) {
  Backend& b = m.backend();
  std::vector<std::vector<uint8_t>> s;
  if (auto* q = dynamic_cast<qwen3_5::Qwen35Cache*>(&c)) {
    s.push_back({static_cast<uint8_t>(q->n_past())});
    for (size_t l = 0; l < q->conv.size(); ++l) {
      if (q->kv_layer[l] >= 0) {
        // Rows of positions [0, n_pos) through the block table, in position order.
        KvPool& pool = q->table.pool();
        const size_t pl = static_cast<size_t>(q->kv_layer[l]);
        for (const Tensor* t : {&pool.k(pl), &pool.v(pl)}) {
          std::vector<uint8_t> rows;
          for (int64_t p = 0; p < n_pos; ++p) {
            const std::vector<uint8_t> r = bytes_of(b, t->slice_rows(q->table.slot(p), q->table.slot(p) + 1));
            rows.insert(rows.end(), r.begin(), r.end());
          }
          s.push_back(std::move(rows));
        }
      } else {
        s.push_back(bytes_of(b, q->conv[l]));
        s.push_back(bytes_of(b, q->state[l]));
      }
    }
    if (q->mtp.on) {
      s.push_back({static_cast<uint8_t>(q->mtp.n_done)});
      s.push_back(bytes_of(b, q->mtp.k[0].tensor().slice_rows(0, q->mtp.n_done)));
      s.push_back(bytes_of(b, q->mtp.v[0].tensor().slice_rows(0, q->mtp.n_done)));
      s.push_back(bytes_of(b, q->mtp.hidden));
    }
  } else if (auto* k = dynamic_cast<lighton_ocr::KvCache*>(&c)) {
    // Rows of positions [0, n_pos) through the block table, in position order.
    KvPool& pool = k->table.pool();
    for (size_t l = 0; l < pool.n_layers(); ++l)
      for (const Tensor* t : {&pool.k(l), &pool.v(l)}) {
        std::vector<uint8_t> rows;
        for (int64_t p = 0; p < n_pos; ++p) {
          const std::vector<uint8_t> r = bytes_of(b, t->slice_rows(k->table.slot(p), k->table.slot(p) + 1));
          rows.insert(rows.end(), r.begin(), r.end());
        }
        s.push_back(std::move(rows));
      }
  }
  return s;
}

Buffer forward_rows(Model& m, SequenceCache& c, const std::vector<int32_t>& ids, int64_t pos0,
                    bool decode_rows, bool all_logits) {
  ForwardBatch b;
  b.token_ids = ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    b.positions.push_back(static_cast<int32_t>(pos0 + static_cast<int64_t>(i)));
    if (all_logits || i + 1 == ids.size()) b.logit_rows.push_back(static_cast<int32_t>(i));
  }
  b.decode_rows = decode_rows;
  auto r = m.forward(b, c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Buffer();
}

std::vector<uint8_t> row_bytes(const Buffer& logits, int64_t row) {
  const int64_t v = logits.shape()[1];
  const auto* p = reinterpret_cast<const uint8_t*>(logits.as<float>() + row * v);
  return std::vector<uint8_t>(p, p + v * 4);
}

int32_t argmax_row(const Buffer& logits, int64_t row) {
  const int64_t v = logits.shape()[1];
  const float* p = logits.as<float>() + row * v;
  int64_t best = 0;
  for (int64_t i = 1; i < v; ++i)
    if (p[i] > p[best]) best = i;
  return static_cast<int32_t>(best);
}

class DraftsVerify : public ::testing::TestWithParam<std::string> {};

// Plain decoding of kSteps greedy tokens, one row per forward, with the logits of each step and the
// cache state after it; then the same decoding through decode_rows forwards of several rows that
// are rolled back, compared bit for bit at every step.
TEST_P(DraftsVerify, RowsEqualOneTokenDecodeAndRollbackRestoresState) {
  Loaded L = load(GetParam());
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  constexpr int kPrompt = 37, kSteps = 12;
  const std::vector<int32_t> prompt = prompt_ids(m, kPrompt);
  const bool mtp = m.n_mtp_layers() > 0;

  auto plain = m.new_cache(kPrompt + kSteps + 8);
  ASSERT_TRUE(m.begin_prompt(*plain, prompt, {}).ok());
  if (mtp) {
    ASSERT_TRUE(m.enable_mtp(*plain).ok());
  }
  Buffer lg = forward_rows(m, *plain, prompt, 0, false, false);
  std::vector<int32_t> toks{argmax_row(lg, 0)};
  std::vector<std::vector<uint8_t>> logits;               // logits[s]: after feeding toks[s]
  std::vector<std::vector<std::vector<uint8_t>>> states;  // states[s]: cache after feeding toks[s]
  for (int s = 0; s < kSteps; ++s) {
    Buffer l = forward_rows(m, *plain, {toks[static_cast<size_t>(s)]}, kPrompt + s, false, true);
    logits.push_back(row_bytes(l, 0));
    states.push_back(state_of(m, *plain, kPrompt + s + 1));
    toks.push_back(argmax_row(l, 0));
  }

  auto ver = m.new_cache(kPrompt + kSteps + 8);
  ASSERT_TRUE(m.begin_prompt(*ver, prompt, {}).ok());
  if (mtp) {
    ASSERT_TRUE(m.enable_mtp(*ver).ok());
  }
  forward_rows(m, *ver, prompt, 0, false, false);
  // Steps of 5 rows: keep 3 (two accepted drafts), then 4 rows where the third is wrong, ...
  int s = 0, round = 0;
  while (s < kSteps - 1) {
    const int rows = std::min(2 + round % 4, kSteps - s);
    const int keep = std::max(1, rows - 1 - round % 2);
    std::vector<int32_t> ids(toks.begin() + s, toks.begin() + s + rows);
    if (round % 3 == 2 && rows > 2) ids.back() = (ids.back() + 1) % static_cast<int32_t>(m.info().vocab_size);
    Buffer l = forward_rows(m, *ver, ids, kPrompt + s, true, true);
    const int good = (round % 3 == 2 && rows > 2) ? rows - 1 : rows;  // rows fed the plain tokens
    for (int i = 0; i < good; ++i)
      EXPECT_EQ(row_bytes(l, i), logits[static_cast<size_t>(s + i)])
          << GetParam() << ": row " << i << " of a " << rows << "-row verification at step " << s;
    const int kept = std::min(keep, good);
    ASSERT_TRUE(m.rollback(*ver, kPrompt + s + kept).ok());
    EXPECT_TRUE(state_of(m, *ver, kPrompt + s + kept) == states[static_cast<size_t>(s + kept - 1)])
        << GetParam() << ": state after rolling back to step " << s + kept - 1;
    s += kept;
    ++round;
  }
  // Rolling back outside the last verification is refused and changes nothing.
  const auto before = state_of(m, *ver, kPrompt + s);
  EXPECT_FALSE(m.rollback(*ver, 0).ok());
  EXPECT_TRUE(state_of(m, *ver, kPrompt + s) == before);
  // One plain step after the verified ones continues exactly like plain decoding.
  Buffer l = forward_rows(m, *ver, {toks[static_cast<size_t>(s)]}, kPrompt + s, false, true);
  EXPECT_EQ(row_bytes(l, 0), logits[static_cast<size_t>(s)]);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, DraftsVerify,
    ::testing::Values("tests/golden/ckpt/lighton_ocr-tiny-bf16", "tests/golden/ckpt/lighton_ocr-tiny-fp32",
                      "tests/golden/ckpt/mistral3-tiny-bf16-untied", "tests/golden/ckpt/qwen3_5-tiny-bf16",
                      "tests/golden/ckpt/qwen3_5-tiny-bf16-untied", "tests/golden/ckpt/qwen3_5-tiny-fp32",
                      "models/demo-lighton", "models/demo-qwen35"),
    [](const auto& info) {
      std::string n = info.param.substr(info.param.rfind('/') + 1);
      for (char& ch : n)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// The rows that decide: a multi-row verification must not take the chunked delta rule. Plain
// prefill-style forwards of the same rows (chunked rule) differ from one-token decoding on this
// checkpoint, which is why decode_rows exists; if they did not, the test above would prove less.
TEST(DraftsVerifyQwen35, ChunkedRowsWouldDiffer) {
  Loaded L = load("tests/golden/ckpt/qwen3_5-tiny-fp32");
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  const std::vector<int32_t> prompt = prompt_ids(m, 37), more = prompt_ids(m, 42);
  const std::vector<int32_t> rows(more.begin() + 37, more.end());
  auto a = m.new_cache(64), b = m.new_cache(64);
  ASSERT_TRUE(m.begin_prompt(*a, prompt, {}).ok());
  ASSERT_TRUE(m.begin_prompt(*b, prompt, {}).ok());
  forward_rows(m, *a, prompt, 0, false, false);
  forward_rows(m, *b, prompt, 0, false, false);
  Buffer chunked = forward_rows(m, *a, rows, 37, false, true);
  Buffer verified = forward_rows(m, *b, rows, 37, true, true);
  bool any_diff = false;
  for (int64_t i = 1; i < 5; ++i) any_diff |= row_bytes(chunked, i) != row_bytes(verified, i);
  EXPECT_TRUE(any_diff);
}

// MTP proposals are deterministic, in range, and leave the target's state alone.
TEST(DraftsVerifyQwen35, MtpProposalsAreTokensAndLeaveTheTargetAlone) {
  Loaded L = load("tests/golden/ckpt/qwen3_5-tiny-bf16");
  ASSERT_TRUE(L.model);
  Model& m = *L.model;
  ASSERT_EQ(m.n_mtp_layers(), 1);
  const std::vector<int32_t> prompt = prompt_ids(m, 20);
  auto c = m.new_cache(40);
  ASSERT_TRUE(m.begin_prompt(*c, prompt, {}).ok());
  EXPECT_FALSE(m.propose_mtp(*c, 5, 3).ok());  // MTP not enabled for this cache
  ASSERT_TRUE(m.enable_mtp(*c).ok());
  Buffer lg = forward_rows(m, *c, prompt, 0, false, false);
  const int32_t next = argmax_row(lg, 0);
  const auto before = state_of(m, *c, 20);
  auto d1 = m.propose_mtp(*c, next, 4);
  ASSERT_TRUE(d1.ok()) << d1.error().message;
  ASSERT_EQ(d1->size(), 4u);
  for (int32_t t : *d1) EXPECT_TRUE(t >= 0 && t < m.info().vocab_size);
  auto d2 = m.propose_mtp(*c, next, 4);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(*d1, *d2);
  auto after = state_of(m, *c, 20);
  // The target's own state (everything but the MTP entries at the end) is untouched.
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i + 4 < before.size(); ++i) EXPECT_TRUE(after[i] == before[i]) << "state tensor " << i;
  EXPECT_FALSE(m.propose_mtp(*c, -1, 2).ok());
  // A checkpoint without MTP weights refuses.
  Loaded lo = load("tests/golden/ckpt/lighton_ocr-tiny-bf16");
  EXPECT_EQ(lo.model->n_mtp_layers(), 0);
  auto lc = lo.model->new_cache(8);
  EXPECT_FALSE(lo.model->enable_mtp(*lc).ok());
}

// n sequences of different prompt lengths with MTP on, each prompt forwarded: caches[j] and the greedy
// token after its prompt (next[j], the one propose_mtp continues from).
struct MtpSeqs {
  std::vector<std::unique_ptr<SequenceCache>> caches;
  std::vector<int32_t> next;
};

MtpSeqs mtp_seqs(Model& m, int n) {
  MtpSeqs out;
  for (int j = 0; j < n; ++j) {
    const std::vector<int32_t> prompt = prompt_ids(m, 9 + 7 * j);
    auto c = m.new_cache(64);
    EXPECT_TRUE(m.begin_prompt(*c, prompt, {}).ok());
    EXPECT_TRUE(m.enable_mtp(*c).ok());
    out.next.push_back(argmax_row(forward_rows(m, *c, prompt, 0, false, false), 0));
    out.caches.push_back(std::move(c));
  }
  return out;
}

// The MTP module's part of a cache: followed count, K/V rows [0, rows) (the chain writes past n_done),
// the pending hidden state.
std::vector<std::vector<uint8_t>> mtp_state(Model& m, SequenceCache& c, int64_t rows) {
  auto& q = dynamic_cast<qwen3_5::Qwen35Cache&>(c);
  Backend& b = m.backend();
  return {{static_cast<uint8_t>(q.mtp.n_done)},
          bytes_of(b, q.mtp.k[0].tensor().slice_rows(0, rows)),
          bytes_of(b, q.mtp.v[0].tensor().slice_rows(0, rows)),
          bytes_of(b, q.mtp.hidden)};
}

// Model::propose_mtp_batch (what the engine's steps call for all their MTP-drafting sequences) gives each
// sequence the proposals propose_mtp gives it alone and leaves the same bytes in its cache, with chains of
// different lengths (k = 4, 1, 3, 0, 2) dropping out of the passes as they end. Every request is checked
// before anything runs. Planted control: with a linear whose sums depend on the row count the batched
// chains leave other MTP K/V bytes.
TEST(DraftsVerifyQwen35, MtpBatchEqualsEachAlone) {
  const int ks[] = {4, 1, 3, 0, 2};
  const int n = 5;
  for (bool planted : {false, true}) {
    Loaded L = load("tests/golden/ckpt/qwen3_5-tiny-bf16", planted);
    ASSERT_TRUE(L.model);
    Model& m = *L.model;
    MtpSeqs a = mtp_seqs(m, n), b = mtp_seqs(m, n);
    std::vector<std::vector<int32_t>> alone;
    for (int j = 0; j < n; ++j) {
      auto d = m.propose_mtp(*a.caches[static_cast<size_t>(j)], a.next[static_cast<size_t>(j)], ks[j]);
      ASSERT_TRUE(d.ok()) << d.error().message;
      EXPECT_EQ(d->size(), static_cast<size_t>(ks[j]));
      alone.push_back(std::move(d).value());
    }
    std::vector<Model::MtpRequest> reqs;
    for (int j = 0; j < n; ++j)
      reqs.push_back({b.caches[static_cast<size_t>(j)].get(), b.next[static_cast<size_t>(j)], ks[j]});
    auto batched = m.propose_mtp_batch(reqs);
    ASSERT_TRUE(batched.ok()) << batched.error().message;
    ASSERT_EQ(batched->size(), static_cast<size_t>(n));
    int differing = 0;
    for (int j = 0; j < n; ++j) {
      const size_t u = static_cast<size_t>(j);
      const int64_t rows = dynamic_cast<qwen3_5::Qwen35Cache&>(*a.caches[u]).n_past() + ks[j];
      const bool same = mtp_state(m, *a.caches[u], rows) == mtp_state(m, *b.caches[u], rows);
      differing += !same;
      if (!planted) {
        EXPECT_EQ((*batched)[u], alone[u]) << "sequence " << j;
        EXPECT_TRUE(same) << "sequence " << j << ": the batched chain left other MTP state";
      }
    }
    if (planted) {
      EXPECT_GT(dynamic_cast<PlantedLinearBackend&>(*L.planted).n_planted, 0);
      EXPECT_GT(differing, 0) << "the check misses MTP rows that depend on their batch";
      continue;
    }
    // Refusals change nothing: a cache without MTP, the same cache twice, a token outside the vocabulary.
    auto plain = m.new_cache(16);
    const std::vector<int32_t> p3 = prompt_ids(m, 3);
    ASSERT_TRUE(m.begin_prompt(*plain, p3, {}).ok());
    const int64_t rows = dynamic_cast<qwen3_5::Qwen35Cache&>(*b.caches[0]).n_past() + 4;
    const auto before = mtp_state(m, *b.caches[0], rows);
    for (auto bad : {std::vector<Model::MtpRequest>{reqs[0], {plain.get(), 1, 2}},
                     std::vector<Model::MtpRequest>{reqs[0], reqs[0]},
                     std::vector<Model::MtpRequest>{reqs[0], {reqs[1].cache, -1, 2}}}) {
      EXPECT_FALSE(m.propose_mtp_batch(bad).ok());
      EXPECT_TRUE(mtp_state(m, *b.caches[0], rows) == before);
    }
  }
}

}  // namespace
}  // namespace tf
