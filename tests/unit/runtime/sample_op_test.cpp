// Backend::sample on the CPU backend against the runtime's host sampler: on many random rows and
// parameters its ids are sample_token's and its logprobs are what the engine computed from the logits
// before sampling moved to the device, bit for bit; a row's record does not depend on the other rows
// of the call; and planted faults (the wrong RNG counter, a slot-dependent draw) are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../backend/sample_rows.h"
#include "backend/ops.h"
#include "runtime/sampler.h"

namespace tf {
namespace {

struct Case {
  int64_t vocab = 0;
  std::vector<float> logits;    // [rows, vocab]
  std::vector<SampleRow> rows;  // [rows]
  int64_t width = 1;
};

// Rows of several shapes and parameters (sample_rows.h).
Case make_case(int64_t vocab, int64_t n_rows, uint32_t seed) {
  Case c;
  c.vocab = vocab;
  c.logits.resize(static_cast<size_t>(n_rows * vocab));
  c.width = samplerows::fill(vocab, n_rows, seed, /*greedy_only=*/false, c.logits.data(), &c.rows);
  return c;
}

// Backend::sample over rows [r0, r1) of the case, in the given order of rows: the records [n, width].
std::vector<int32_t> run_op(Backend& b, const Case& c, const std::vector<int64_t>& order, int64_t width) {
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<float> lg;
  std::vector<SampleRow> ps;
  for (int64_t r : order) {
    lg.insert(lg.end(), c.logits.begin() + r * c.vocab, c.logits.begin() + (r + 1) * c.vocab);
    ps.push_back(c.rows[static_cast<size_t>(r)]);
  }
  DeviceBuffer logits = b.alloc(DType::F32, {n, c.vocab});
  b.upload(logits, lg.data());
  DeviceBuffer params = b.alloc(DType::I32, {n, kSampleRowWords});
  b.upload(params, ps.data());
  DeviceBuffer out = b.alloc(DType::I32, {n, width});
  b.sample(logits, params, out);
  std::vector<int32_t> rec(static_cast<size_t>(n * width));
  b.download(out, rec.data());
  return rec;
}

float f32_at(const int32_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// The expected record of row r: sample_token's id, and the logprobs as Engine::emit_token computed them
// from the host logits (the code it ran before they moved to the op, kept here as the reference).
std::vector<int32_t> expected_record(const Case& c, int64_t r, int64_t width) {
  const std::span<const float> logits(c.logits.data() + r * c.vocab, static_cast<size_t>(c.vocab));
  const SampleRow& p = c.rows[static_cast<size_t>(r)];
  SamplingParams sp;
  sp.temperature = p.temperature;
  sp.top_p = p.top_p;
  sp.top_k = p.top_k;
  sp.seed = p.seed;
  std::vector<int32_t> rec(static_cast<size_t>(width), 0);
  const int32_t tok = sample_token(logits, sp, p.position);
  rec[0] = tok;
  if (width == 1 || p.n_logprobs < 0) return rec;
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  const float lp = logits[static_cast<size_t>(tok)] - lse;
  std::memcpy(&rec[1], &lp, 4);
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t k = std::min(idx.size(), static_cast<size_t>(p.n_logprobs));
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
                    });
  for (size_t j = 0; j < k; ++j) {
    rec[2 + 2 * j] = idx[j];
    const float v = logits[static_cast<size_t>(idx[j])] - lse;
    std::memcpy(&rec[3 + 2 * j], &v, 4);
  }
  return rec;
}

// Rows whose record differs from the reference's (first few described in *detail).
int64_t count_mismatches(const Case& c, const std::vector<int32_t>& got, int64_t width, std::string* detail) {
  const int64_t n = static_cast<int64_t>(c.rows.size());
  int64_t bad = 0;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<int32_t> want = expected_record(c, r, width);
    if (std::equal(want.begin(), want.end(), got.begin() + r * width)) continue;
    if (bad++ < 3 && detail)
      *detail += "row " + std::to_string(r) + ": id " + std::to_string(got[static_cast<size_t>(r * width)]) +
                 " vs sample_token " + std::to_string(want[0]) + "; ";
  }
  return bad;
}

std::vector<int64_t> iota_rows(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

class SampleOp : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = create_backend("cpu");
    ASSERT_TRUE(b.ok());
    be_ = std::move(b).value();
  }
  std::unique_ptr<Backend> be_;
};

TEST_F(SampleOp, IdsAndLogprobsAreTheHostSamplers) {
  int64_t sampled_rows = 0, distinct_draws = 0;
  for (const int64_t vocab : {1, 2, 7, 64, 1000, 5003}) {
    const Case c = make_case(vocab, 96, static_cast<uint32_t>(vocab) * 7919u + 1u);
    const std::vector<int32_t> got = run_op(*be_, c, iota_rows(96), c.width);
    std::string detail;
    EXPECT_EQ(count_mismatches(c, got, c.width, &detail), 0) << "vocab " << vocab << ": " << detail;
    for (int64_t r = 0; r < 96; ++r) {
      const SampleRow& p = c.rows[static_cast<size_t>(r)];
      if (p.temperature <= 0.0f) continue;
      ++sampled_rows;
      distinct_draws += got[static_cast<size_t>(r * c.width)] !=
                        sampling::argmax(std::span<const float>(c.logits.data() + r * vocab, vocab));
    }
  }
  // The cases exercise real draws, not only argmaxes.
  EXPECT_GT(sampled_rows, 300);
  EXPECT_GT(distinct_draws, 50);
}

TEST_F(SampleOp, LogprobsAreSoftmaxOfTheRawLogits) {
  const Case c = make_case(300, 32, 5);
  const std::vector<int32_t> got = run_op(*be_, c, iota_rows(32), c.width);
  int64_t checked = 0;
  for (int64_t r = 0; r < 32; ++r) {
    if (c.rows[static_cast<size_t>(r)].n_logprobs < 0) continue;
    const float* l = c.logits.data() + r * 300;
    double z = 0, mx = -INFINITY;
    for (int64_t j = 0; j < 300; ++j) mx = std::max(mx, static_cast<double>(l[j]));
    for (int64_t j = 0; j < 300; ++j) z += std::exp(l[j] - mx);
    const int32_t tok = got[static_cast<size_t>(r * c.width)];
    EXPECT_NEAR(f32_at(&got[static_cast<size_t>(r * c.width + 1)]), l[tok] - mx - std::log(z), 1e-4);
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

TEST_F(SampleOp, RowAloneEqualsRowAmongOthers) {
  const Case c = make_case(777, 40, 11);
  const std::vector<int32_t> all = run_op(*be_, c, iota_rows(40), c.width);
  std::vector<int64_t> reversed = iota_rows(40);
  std::reverse(reversed.begin(), reversed.end());
  const std::vector<int32_t> rev = run_op(*be_, c, reversed, c.width);
  for (int64_t r = 0; r < 40; ++r) {
    const std::vector<int32_t> alone = run_op(*be_, c, {r}, c.width);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + r * c.width)) << "row " << r;
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), rev.begin() + (39 - r) * c.width)) << "row " << r;
    // A wider record holds the same id and logprobs (the width is the call's, not the row's).
    const std::vector<int32_t> wide = run_op(*be_, c, {r}, c.width == 1 ? 8 : c.width + 6);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), wide.begin())) << "row " << r;
    EXPECT_EQ(alone[0], run_op(*be_, c, {r}, 1)[0]) << "row " << r;
  }
}

// Planted controls: the comparisons above must see these faults.
TEST_F(SampleOp, PlantedFaultsAreCaught) {
  Case c = make_case(1000, 96, 1000u * 7919u + 1u);
  // The next position's RNG counter: the reference comparison catches it.
  Case shifted = c;
  for (SampleRow& p : shifted.rows) p.position += 1;
  std::string detail;
  EXPECT_GT(count_mismatches(c, run_op(*be_, shifted, iota_rows(96), c.width), c.width, &detail), 5);
  // A slot-dependent draw (row i keyed with position + i, as a kernel mixing up its counters would): the
  // row-alone-vs-among-others comparison catches it.
  Case slotted = c;
  for (size_t i = 0; i < slotted.rows.size(); ++i) slotted.rows[i].position += i;
  const std::vector<int32_t> among = run_op(*be_, slotted, iota_rows(96), c.width);
  int64_t differ = 0;
  for (int64_t r = 0; r < 96; ++r) {
    const std::vector<int32_t> alone = run_op(*be_, c, {r}, c.width);
    differ += !std::equal(alone.begin(), alone.end(), among.begin() + r * c.width);
  }
  EXPECT_GT(differ, 5);
}

}  // namespace
}  // namespace tf
