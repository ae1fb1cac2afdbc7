// Captures in Transformers' layout, for comparisons with the oracle (tests, tools/stage_diff). Only the
// Pixtral patch_conv differs: HF keeps the conv output of the padded batch, [n_images, hidden,
// gh_max, gw_max]; the engine captures the real patches, [Σ gh*gw, hidden], image by image, row-major.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tf::lighton_ocr {

inline bool is_patch_conv(const std::string& name) {
  const std::string suffix = ".patch_conv";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// grids: each image's (gh, gw) in patches. The padding region (conv of zero pixels in HF) is left 0;
// mask_patch_conv_padding zeroes it on the oracle's side too.
inline std::vector<float> patch_conv_to_hf(const std::vector<float>& mine, const Shape& hf,
                                           const std::vector<std::pair<int64_t, int64_t>>& grids) {
  const int64_t B = hf[0], C = hf[1], GH = hf[2], GW = hf[3];
  std::vector<float> out(static_cast<size_t>(B * C * GH * GW), 0.0f);
  int64_t row = 0;
  for (int64_t b = 0; b < B && b < static_cast<int64_t>(grids.size()); ++b)
    for (int64_t i = 0; i < grids[b].first; ++i)
      for (int64_t j = 0; j < grids[b].second; ++j, ++row)
        for (int64_t c = 0; c < C; ++c)
          out[static_cast<size_t>(((b * C + c) * GH + i) * GW + j)] = mine[static_cast<size_t>(row * C + c)];
  return out;
}

inline void mask_patch_conv_padding(std::vector<float>& hf_values, const Shape& s,
                                    const std::vector<std::pair<int64_t, int64_t>>& grids) {
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t j = 0; j < s[3]; ++j)
          if (b >= static_cast<int64_t>(grids.size()) || i >= grids[b].first || j >= grids[b].second)
            hf_values[static_cast<size_t>(((b * s[1] + c) * s[2] + i) * s[3] + j)] = 0.0f;
}

}  // namespace tf::lighton_ocr
