// The CUDA kernels of the Gated DeltaNet ops over all segments of a step on a pool of state slots
// (causal_conv1d_slots.cu, gated_delta_rule_slots.cu; ops.h *_slots): within CUDA, bit for bit what the
// one-sequence kernels give per segment (outputs, every slot's window and state, the kept rows), so a
// sequence's bits do not depend on the other segments of its step; against the CPU's batched op, the
// one-sequence ops' contract (the conv and the recurrent delta rule are the CPU's arithmetic: Close; the
// chunked delta rule runs on tensor cores: NearDelta, cuda_contract_qwen_test.cpp). Planted control: two
// segments' slots exchanged must fail the within-CUDA comparison. Skips without CUDA (the lead runs it on the
// GPU).
#include <array>
#include <cstring>

#include "backend/test_hooks.h"

#include "cuda_contract_util.h"
#include "gdn_slots_case.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};

std::string case_str(const slotcase::Case& c, DType act) {
  return cat(c.chunked ? "chunked " : "recurrent ", c.segs.size(), " segments hv ", c.hv, " dk ", c.dk,
             " dv ", c.dv, " ", dtype_name(act));
}

TEST_F(CudaContract, GdnSlotsBatchedEqualsPerSegmentWithinCuda) {
  uint32_t seed = 7000;
  for (const auto& shape : {std::array<int64_t, 4>{2, 4, 32, 16}, std::array<int64_t, 4>{16, 32, 128, 128},
                            std::array<int64_t, 4>{1, 2, 33, 17}})
    for (const slotcase::Case& c : slotcase::cases(shape[0], shape[1], shape[2], shape[3]))
      for (DType act : kActs) {
        const std::string what = case_str(c, act);
        const auto ref = slotcase::run(dev(), c, act, seed, false),
                   got = slotcase::run(dev(), c, act, seed, true),
                   split = slotcase::run(dev(), c, act, seed, true, false, /*split_out=*/true);
        seed += 10;
        EXPECT_TRUE(Exact(ref.conv_out, got.conv_out)) << what << " conv out";
        EXPECT_TRUE(Exact(got.conv_out, split.conv_out)) << what << " conv out as three column ranges";
        EXPECT_TRUE(Exact(got.windows, split.windows)) << what << " windows (split conv)";
        EXPECT_TRUE(Exact(ref.windows, got.windows)) << what << " windows";
        EXPECT_TRUE(Exact(ref.conv_keep, got.conv_keep)) << what << " kept windows";
        EXPECT_TRUE(Exact(ref.out, got.out)) << what << " delta-rule out";
        EXPECT_TRUE(Exact(ref.states, got.states)) << what << " states";
        EXPECT_TRUE(Exact(ref.keep, got.keep)) << what << " kept states";
      }
}

TEST_F(CudaContract, GdnSlotsBatchedAgainstCpu) {
  uint32_t seed = 7500;
  for (const slotcase::Case& c : slotcase::cases(2, 4, 128, 64))
    for (DType act : kActs) {
      const std::string what = case_str(c, act);
      const auto ref = slotcase::run(cpu(), c, act, seed, true),
                 got = slotcase::run(dev(), c, act, seed, true);
      seed += 10;
      EXPECT_TRUE(Close(ref.conv_out, got.conv_out, what + " conv out"));
      EXPECT_TRUE(Exact(ref.windows, got.windows)) << what << " windows (raw inputs: exact)";
      EXPECT_TRUE(Exact(ref.conv_keep, got.conv_keep)) << what << " kept windows";
      // The recurrent form is the CPU's arithmetic; the chunked one runs on tensor cores (NearDelta).
      auto near = [&](const Buffer& r, const Buffer& g, const std::string& w) {
        return c.chunked ? NearDelta(r, g, w) : Close(r, g, w);
      };
      EXPECT_TRUE(near(ref.out, got.out, what + " delta-rule out"));
      EXPECT_TRUE(near(ref.states, got.states, what + " states"));
      EXPECT_TRUE(near(ref.keep, got.keep, what + " kept states"));
    }
}

TEST_F(CudaContract, GdnSlotsPlantedWrongSlotMappingIsCaught) {
  for (const slotcase::Case& c : slotcase::cases(2, 4, 32, 16)) {
    const auto ref = slotcase::run(dev(), c, DType::BF16, 7900, false);
    const auto bad = slotcase::run(dev(), c, DType::BF16, 7900, true, /*swap_slots=*/true);
    EXPECT_FALSE(Exact(ref.out, bad.out)) << case_str(c, DType::BF16) << ": exchanged slots not seen (out)";
    EXPECT_FALSE(Exact(ref.states, bad.states)) << case_str(c, DType::BF16) << ": exchanged slots not seen";
  }
}

// The per-token variant (test_hooks::set_cuda_delta_rule_variant(1)) runs the batched ops segment by
// segment through its own kernel: the same bits as its one-sequence calls.
TEST_F(CudaContract, GdnSlotsSeqVariantEqualsPerSegment) {
  ASSERT_TRUE(test_hooks::set_cuda_delta_rule_variant(1));
  uint32_t seed = 8000;
  for (const slotcase::Case& c : slotcase::cases(2, 4, 64, 32)) {
    const auto ref = slotcase::run(dev(), c, DType::BF16, seed, false);
    const auto got = slotcase::run(dev(), c, DType::BF16, seed, true);
    seed += 10;
    EXPECT_TRUE(Exact(ref.out, got.out)) << case_str(c, DType::BF16) << " out";
    EXPECT_TRUE(Exact(ref.states, got.states)) << case_str(c, DType::BF16) << " states";
    EXPECT_TRUE(Exact(ref.keep, got.keep)) << case_str(c, DType::BF16) << " kept states";
  }
  test_hooks::set_cuda_delta_rule_variant(0);
}

}  // namespace
