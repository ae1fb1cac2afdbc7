#include "models/layers/rope.h"

#include <cmath>

namespace tf {

std::vector<float> rope_inv_freq(int64_t dim, double theta) {
  std::vector<float> f(static_cast<size_t>(dim / 2));
  const float base = static_cast<float>(theta);
  for (int64_t k = 0; k < dim / 2; ++k) {
    const float e = static_cast<float>(2 * k) / static_cast<float>(dim);
    const float p = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    f[static_cast<size_t>(k)] = 1.0f / p;
  }
  return f;
}

Buffer rope_angles_1d(const std::vector<int32_t>& positions, const std::vector<float>& inv_freq) {
  const int64_t n = static_cast<int64_t>(positions.size()), h = static_cast<int64_t>(inv_freq.size());
  Buffer a(DType::F32, {n, h});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < h; ++k)
      a.as<float>()[i * h + k] =
          static_cast<float>(positions[static_cast<size_t>(i)]) * inv_freq[static_cast<size_t>(k)];
  return a;
}

Buffer pixtral_rope_angles(const std::vector<std::pair<int64_t, int64_t>>& grids, int64_t head_dim,
                           double theta) {
  const std::vector<float> f = rope_inv_freq(head_dim, theta);
  const int64_t q = head_dim / 4, half = head_dim / 2;
  int64_t n = 0;
  for (auto [gh, gw] : grids) n += gh * gw;
  Buffer a(DType::F32, {n, half});
  float* out = a.as<float>();
  int64_t row = 0;
  for (auto [gh, gw] : grids)
    for (int64_t r = 0; r < gh; ++r)
      for (int64_t c = 0; c < gw; ++c, ++row)
        for (int64_t j = 0; j < q; ++j) {
          out[row * half + j] = static_cast<float>(r) * f[static_cast<size_t>(2 * j)];
          out[row * half + q + j] = static_cast<float>(c) * f[static_cast<size_t>(2 * j + 1)];
        }
  return a;
}

}  // namespace tf
