// Counter-based RNG (Philox-4x32-10). A draw is a pure function of (seed, output position, draw
// index): the same seed gives the same draws wherever and whenever a request runs (batch, slot,
// drafts, resumption do not matter) — docs/design.md, invariant 2.
#pragma once
#include <array>
#include <cstdint>

namespace tf {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Uniform double in [0, 1) with 53 random bits, keyed by (seed, position, stream).
double uniform_at(uint64_t seed, uint64_t position, uint32_t stream = 0);

}  // namespace tf
