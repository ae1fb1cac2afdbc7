// The Gated DeltaNet ops over all segments of a step on a pool of state slots (ops.h *_slots) on the
// CPU reference: one batched call per op gives, bit for bit, what the per-segment calls the model made
// before the pool give (outputs, every slot's window and state, the kept rows); rows outside every
// segment and slots outside every segment are left alone; and a planted wrong slot mapping (two
// segments' slots exchanged) is caught by the same comparison.
#include <cstring>

#include "gdn_slots_case.h"

using namespace tf;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};

bool same(const Buffer& a, const Buffer& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(GdnSlots, BatchedOpsEqualPerSegmentCalls) {
  auto be = make_cpu_backend();
  uint32_t seed = 100;
  for (const slotcase::Case& c : slotcase::cases(2, 4, 32, 16))
    for (DType act : kActs) {
      SCOPED_TRACE(std::string(c.chunked ? "chunked " : "recurrent ") + std::to_string(c.segs.size()) +
                   " segments " + std::string(dtype_name(act)));
      const auto ref = slotcase::run(*be, c, act, seed, false), got = slotcase::run(*be, c, act, seed, true);
      const auto split = slotcase::run(*be, c, act, seed, true, false, /*split_out=*/true);
      seed += 10;
      EXPECT_TRUE(same(ref.conv_out, got.conv_out)) << "conv out";
      EXPECT_TRUE(same(got.conv_out, split.conv_out)) << "conv out written as three column ranges";
      EXPECT_TRUE(same(got.windows, split.windows) && same(got.out, split.out)) << "split conv: the rest";
      EXPECT_TRUE(same(ref.windows, got.windows)) << "windows";
      EXPECT_TRUE(same(ref.conv_keep, got.conv_keep)) << "kept windows";
      EXPECT_TRUE(same(ref.out, got.out)) << "delta-rule out";
      EXPECT_TRUE(same(ref.states, got.states)) << "states";
      EXPECT_TRUE(same(ref.keep, got.keep)) << "kept states";
    }
}

TEST(GdnSlots, RowsAndSlotsOutsideTheSegmentsAreUntouched) {
  auto be = make_cpu_backend();
  for (const slotcase::Case& c : slotcase::cases(1, 2, 16, 8)) {
    const DType act = DType::BF16;
    const uint32_t seed = 300;
    const auto got = slotcase::run(*be, c, act, seed, true);
    const slotcase::Layout L = slotcase::layout(c, false);
    std::vector<uint8_t> used(static_cast<size_t>(c.n_slots), 0), in_seg(static_cast<size_t>(L.n), 0);
    for (size_t i = 0; i < c.segs.size(); ++i) {
      used[static_cast<size_t>(c.segs[i].slot)] = 1;
      for (int64_t r = L.segs[6 * i]; r < L.segs[6 * i + 1]; ++r) in_seg[static_cast<size_t>(r)] = 1;
    }
    // The same initial pool the case starts from (slotcase::run's seeds).
    const Buffer win0 = optest::randn(act, {c.n_slots, c.C, c.K - 1}, seed + 2, 2.0f);
    const Buffer st0 = optest::randn(DType::F32, {c.n_slots, c.hv, c.dk, c.dv}, seed + 6, 0.3f);
    int untouched_slots = 0, gap_rows = 0;
    for (int64_t s = 0; s < c.n_slots; ++s) {
      const bool w_same = same(slotcase::clone_rows(got.windows, s), slotcase::clone_rows(win0, s));
      const bool s_same = same(slotcase::clone_rows(got.states, s), slotcase::clone_rows(st0, s));
      if (!used[static_cast<size_t>(s)]) {
        EXPECT_TRUE(w_same && s_same) << "slot " << s << " is in no segment but changed";
        ++untouched_slots;
      } else {
        EXPECT_FALSE(s_same) << "slot " << s << " ran a segment but its state did not change";
      }
    }
    for (int64_t r = 0; r < L.n; ++r) {
      if (in_seg[static_cast<size_t>(r)]) continue;
      ++gap_rows;
      const Buffer row = slotcase::clone_rows(got.out, r);
      const Buffer zero(row.dtype(), row.shape());
      EXPECT_TRUE(same(row, zero)) << "row " << r << " is in no segment but was written";
    }
    EXPECT_GT(untouched_slots, 0);
    EXPECT_GT(gap_rows + (c.gap == 0 ? 1 : 0), 0);
  }
}

TEST(GdnSlots, PlantedWrongSlotMappingIsCaught) {
  auto be = make_cpu_backend();
  for (const slotcase::Case& c : slotcase::cases(2, 4, 32, 16)) {
    const auto ref = slotcase::run(*be, c, DType::BF16, 500, false);
    const auto bad = slotcase::run(*be, c, DType::BF16, 500, true, /*swap_slots=*/true);
    EXPECT_FALSE(same(ref.out, bad.out)) << "the comparison misses exchanged slots (out)";
    EXPECT_FALSE(same(ref.states, bad.states)) << "the comparison misses exchanged slots (states)";
  }
}

}  // namespace
