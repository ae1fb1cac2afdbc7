#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "base/rng.h"
#include "runtime/sampler.h"

using namespace tf;

TEST(Rng, PhiloxKnownAnswer) {
  // Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32_10).
  auto r = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
  auto r2 = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(r2[0], 0x408f276du);
  EXPECT_EQ(r2[1], 0x41c83b0eu);
  EXPECT_EQ(r2[2], 0xa20bc7c6u);
  EXPECT_EQ(r2[3], 0x6d5451fdu);
}

TEST(Rng, UniformIsAPureFunctionOfItsKey) {
  EXPECT_EQ(uniform_at(7, 3), uniform_at(7, 3));
  EXPECT_NE(uniform_at(7, 3), uniform_at(8, 3));
  EXPECT_NE(uniform_at(7, 3), uniform_at(7, 4));
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    double u = uniform_at(1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u;
  }
  EXPECT_NEAR(mean / 10000, 0.5, 0.02);
}

TEST(Sampler, GreedyTiesGoToLowestIndex) {
  std::vector<float> l{1.0f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(argmax(l), 1);
  EXPECT_EQ(top2_margin(l), 0.0f);
  SamplingParams p;  // temperature 0
  EXPECT_EQ(sample_token(l, p, 0), 1);
}

TEST(Sampler, TopKKeepsOnlyKLargest) {
  std::vector<float> l{0.0f, 5.0f, 4.0f, 3.0f, 1.0f};
  SamplingParams p{1.0f, 1.0f, 2, 42};
  for (int pos = 0; pos < 200; ++pos) {
    int32_t t = sample_token(l, p, pos);
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
}

TEST(Sampler, TopPKeepsSmallestSetAboveP) {
  // probs ~ [0.665, 0.245, 0.09]: top_p 0.6 keeps only the first; 0.8 keeps two.
  std::vector<float> l{2.0f, 1.0f, 0.0f};
  SamplingParams p{1.0f, 0.6f, 0, 1};
  auto c = filtered_distribution(l, p);
  ASSERT_EQ(c.ids.size(), 1u);
  EXPECT_EQ(c.ids[0], 0);
  p.top_p = 0.8f;
  c = filtered_distribution(l, p);
  ASSERT_EQ(c.ids.size(), 2u);
  EXPECT_NEAR(c.probs[0] + c.probs[1], 1.0f, 1e-6f);
}

TEST(Sampler, SeedDeterminesDrawsAndFrequenciesFollowProbabilities) {
  std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p{1.0f, 1.0f, 0, 123};
  std::map<int, int> counts;
  for (int pos = 0; pos < 20000; ++pos) counts[sample_token(l, p, pos)]++;
  EXPECT_NEAR(counts[0] / 20000.0, 0.5, 0.02);
  EXPECT_NEAR(counts[1] / 20000.0, 0.3, 0.02);
  EXPECT_NEAR(counts[2] / 20000.0, 0.2, 0.02);
  SamplingParams q = p;
  q.seed = 124;
  int same = 0;
  for (int pos = 0; pos < 200; ++pos) {
    EXPECT_EQ(sample_token(l, p, pos), sample_token(l, p, pos));
    same += sample_token(l, p, pos) == sample_token(l, q, pos);
  }
  EXPECT_LT(same, 200);
}
