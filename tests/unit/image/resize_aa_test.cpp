// Resize invariants; bit-exact comparisons against torchvision live in resize_golden_test.cpp.
#include <gtest/gtest.h>

#include <random>

#include "image/resize_aa.h"

namespace tf {
namespace {

std::vector<uint8_t> random_planes(int c, int h, int w, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(c) * h * w);
  for (auto& x : v) x = static_cast<uint8_t>(rng() & 0xff);
  return v;
}

TEST(ResizeAa, SameSizeIsCopy) {
  const auto in = random_planes(3, 17, 23, 1);
  EXPECT_EQ(resize_aa_u8(in, 3, 17, 23, 17, 23, ResizeFilter::bicubic), in);
}

TEST(ResizeAa, ConstantImageStaysConstant) {
  // Weights are normalized to sum 1, so a flat image resamples to itself at any scale.
  for (int v : {0, 1, 128, 254, 255}) {
    std::vector<uint8_t> in(3 * 31 * 47, static_cast<uint8_t>(v));
    for (auto [oh, ow] : {std::pair{10, 13}, {64, 99}, {31, 20}, {5, 47}}) {
      for (ResizeFilter f : {ResizeFilter::bicubic, ResizeFilter::bilinear}) {
        const auto out = resize_aa_u8(in, 3, 31, 47, oh, ow, f);
        ASSERT_EQ(out.size(), static_cast<size_t>(3 * oh * ow));
        for (uint8_t o : out) ASSERT_EQ(o, v) << oh << "x" << ow;
      }
    }
  }
}

TEST(ResizeAa, OnlyChangedAxisIsResampled) {
  // Changing only the width must leave each row independent of the others (no vertical pass).
  auto in = random_planes(1, 8, 40, 2);
  const auto out = resize_aa_u8(in, 1, 8, 40, 8, 17, ResizeFilter::bicubic);
  for (int r = 0; r < 8; ++r) {
    std::vector<uint8_t> row(in.begin() + r * 40, in.begin() + (r + 1) * 40);
    const auto one = resize_aa_u8(row, 1, 1, 40, 1, 17, ResizeFilter::bicubic);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), out.begin() + r * 17)) << "row " << r;
  }
}

TEST(ResizeAa, TransposeSymmetry) {
  // The same kernel runs on both axes: resizing the transpose gives the transposed result when
  // only one axis changes.
  const int h = 1, w = 57;
  auto in = random_planes(1, h, w, 3);
  const auto a = resize_aa_u8(in, 1, h, w, 1, 23, ResizeFilter::bicubic);
  const auto b = resize_aa_u8(in, 1, w, h, 23, 1, ResizeFilter::bicubic);
  EXPECT_EQ(a, b);
}

TEST(ResizeAa, MirrorSymmetry) {
  // Sampling positions are symmetric about the centre, so mirroring commutes with resizing.
  for (auto [w, ow] : {std::pair{64, 16}, {100, 37}, {20, 53}}) {
    auto in = random_planes(1, 1, w, 4 + w);
    std::vector<uint8_t> mir(in.rbegin(), in.rend());
    const auto a = resize_aa_u8(in, 1, 1, w, 1, ow, ResizeFilter::bicubic);
    const auto b = resize_aa_u8(mir, 1, 1, w, 1, ow, ResizeFilter::bicubic);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.rbegin())) << w << "->" << ow;
  }
}

TEST(ResizeAa, PlanPrecisionFitsInt16) {
  for (auto [in, out] : {std::pair{1000, 1540}, {3000, 1540}, {7, 3}, {2, 1000}}) {
    const AxisResample p = plan_axis_resample(in, out, ResizeFilter::bicubic);
    ASSERT_GT(p.precision, 0);
    for (int i = 0; i < out; ++i) {
      ASSERT_GE(p.xmin[i], 0);
      ASSERT_LE(p.xmin[i] + p.xsize[i], in);
      int sum = 0;
      for (int j = 0; j < p.xsize[i]; ++j) sum += p.weights[i * p.ksize + j];
      // Rounded weights sum to 2^precision within the rounding of each tap.
      ASSERT_LE(std::abs(sum - (1 << p.precision)), p.xsize[i]) << in << "->" << out << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tf
