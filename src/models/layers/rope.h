// Host-side RoPE angle tables (F32), built exactly as Transformers builds them; the backend turns
// angles into act-dtype cos/sin (Backend::rope_cos_sin). Angles are small (rows × head_dim/2).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tf {

// inv_freq[k] = 1.0f / fl32(θ ** fl32(2k / dim)), k < dim/2, all in f32 as the HF default rope init
// computes it (torch.pow with an f32 exponent; the power is taken correctly rounded here).
std::vector<float> rope_inv_freq(int64_t dim, double theta);

// 1D: angles[i, k] = fl32(positions[i] * inv_freq[k]) (HF: inv_freq ⊗ position_ids, an exact
// f32 product). [n, inv_freq.size()].
Buffer rope_angles_1d(const std::vector<int32_t>& positions, const std::vector<float>& inv_freq);

// Pixtral 2D (PixtralRotaryEmbedding): f = rope_inv_freq(head_dim, θ); for patch (r, c) of each
// image (r, c restart at 0 per image, patches row-major):
//   angles[:, j] = fl32(r * f[2j]),  angles[:, head_dim/4 + j] = fl32(c * f[2j + 1]),  j < head_dim/4.
// grids: (rows, cols) of patches per image. [Σ rows*cols, head_dim/2].
Buffer pixtral_rope_angles(const std::vector<std::pair<int64_t, int64_t>>& grids, int64_t head_dim,
                           double theta);

}  // namespace tf
