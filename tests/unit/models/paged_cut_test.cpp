// paged_attention_cut (models/layers/kv_pool.h): a step whose leading segments have few rows (decodes, a
// draft verification) and whose later ones are prefill chunks runs its paged attention as two calls, so the
// CUDA backend takes its decode-shaped blocks for the first part and its prefill tiles for the second. Every
// row must keep the bits of the single call over all segments (on TF_TEST_BACKEND=cuda that compares two
// kernel families; on the CPU it checks the slicing and the rebased seg_rows). Control: the tail with two
// segments' block tables swapped must change the tail's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "../test_backend.h"
#include "backend/ops.h"
#include "models/layers/kv_pool.h"

namespace tf {
namespace {

struct Seg {
  int64_t rows, keys;  // query rows (the segment's last positions), keys
};

DeviceBuffer upload_vec(Backend& b, DType dt, Shape s, const void* host) {
  DeviceBuffer d = b.alloc(dt, std::move(s));
  b.upload(d, host);
  return d;
}

std::vector<uint16_t> bf16_randn(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (auto& v : out) {
    const float f = nd(g);
    uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    v = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return out;
}

TEST(PagedAttentionCut, TwoCallsEqualOneCall) {
  auto be = create_backend(test_backend_name());
  ASSERT_TRUE(be.ok());
  Backend& b = **be;
  const std::vector<Seg> segs = {{1, 200},   {1, 600}, {1, 1100},
                                 {5, 700},   {1, 64},             // few-row: the cut's first part
                                 {130, 300}, {70, 70}, {3, 90}};  // prefill chunks (a short one last)
  constexpr int64_t kHeads = 4, kKvHeads = 2, kD = 64, kCutSegs = 5;
  const int64_t n_seg = static_cast<int64_t>(segs.size());
  int64_t n = 0, blocks = 0, width = 1;
  for (const Seg& s : segs) {
    n += s.rows;
    blocks += (s.keys + kKvBlock - 1) / kKvBlock;
    width = std::max(width, (s.keys + kKvBlock - 1) / kKvBlock);
  }
  std::vector<int32_t> ids(static_cast<size_t>(blocks + 3));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  std::vector<int32_t> tables(static_cast<size_t>(n_seg * width), 0), seg_rows{0}, ranges;
  size_t next = 0;
  for (int64_t s = 0; s < n_seg; ++s) {
    const Seg& sg = segs[static_cast<size_t>(s)];
    for (int64_t j = 0; j * kKvBlock < sg.keys; ++j) tables[static_cast<size_t>(s * width + j)] = ids[next++];
    seg_rows.push_back(seg_rows.back() + static_cast<int32_t>(sg.rows));
    for (int64_t i = 0; i < sg.rows; ++i) {  // causal over the segment's own keys
      ranges.push_back(0);
      ranges.push_back(static_cast<int32_t>(sg.keys - sg.rows + i + 1));
    }
  }
  const int64_t cut_rows = seg_rows[kCutSegs];
  std::vector<int32_t> tail;
  for (int64_t s = kCutSegs; s <= n_seg; ++s) tail.push_back(seg_rows[static_cast<size_t>(s)] - cut_rows);

  const int64_t pool_rows = static_cast<int64_t>(ids.size()) * kKvBlock;
  const auto hq = bf16_randn(n * kHeads * kD, 1), hk = bf16_randn(pool_rows * kKvHeads * kD, 2),
             hv = bf16_randn(pool_rows * kKvHeads * kD, 3);
  DeviceBuffer q = upload_vec(b, DType::BF16, {n, kHeads, kD}, hq.data());
  DeviceBuffer k = upload_vec(b, DType::BF16, {pool_rows, kKvHeads, kD}, hk.data());
  DeviceBuffer v = upload_vec(b, DType::BF16, {pool_rows, kKvHeads, kD}, hv.data());
  DeviceBuffer dt = upload_vec(b, DType::I32, {n_seg, width}, tables.data());
  DeviceBuffer ds = upload_vec(b, DType::I32, {n_seg + 1}, seg_rows.data());
  DeviceBuffer dr = upload_vec(b, DType::I32, {n, 2}, ranges.data());
  DeviceBuffer dtail = upload_vec(b, DType::I32, {n_seg - kCutSegs + 1}, tail.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  auto run = [&](const Tensor& tab, bool cut) {
    DeviceBuffer out = b.alloc(DType::BF16, {n, kHeads, kD});
    paged_attention_cut(b, q, k, v, tab, ds, cut ? PagedCut{&dtail.tensor(), kCutSegs, cut_rows} : PagedCut{},
                        dr, scale, out);
    std::vector<uint16_t> h(static_cast<size_t>(n * kHeads * kD));
    b.download(out, h.data());
    return h;
  };
  const auto one = run(dt, false), two = run(dt, true);
  EXPECT_TRUE(one == two) << "the cut's two calls differ from the single call";

  // Control: segments 5 and 6 (both in the tail) with each other's block tables.
  std::vector<int32_t> swapped = tables;
  std::swap_ranges(swapped.begin() + 5 * width, swapped.begin() + 6 * width, swapped.begin() + 6 * width);
  DeviceBuffer dsw = upload_vec(b, DType::I32, {n_seg, width}, swapped.data());
  const auto ctl = run(dsw, true);
  const size_t tail0 = static_cast<size_t>(cut_rows * kHeads * kD);
  EXPECT_TRUE(std::equal(one.begin(), one.begin() + static_cast<std::ptrdiff_t>(tail0), ctl.begin()))
      << "the first part must not depend on the tail's tables";
  EXPECT_FALSE(std::equal(one.begin() + static_cast<std::ptrdiff_t>(tail0), one.end(),
                          ctl.begin() + static_cast<std::ptrdiff_t>(tail0)))
      << "control: swapped tail tables not seen";
}

}  // namespace
}  // namespace tf
