// Pieces shared by the image processors: reading preprocessor_config.json fields with clear errors,
// and Transformers' TorchvisionBackend rescale + normalize in float32.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "image/image.h"
#include "image/resize_aa.h"

namespace tf::image_detail {

// Each getter leaves *out unchanged when the key is absent or null, and errors on a wrong type or
// range, naming "preprocessor_config.json: <key>".
Status get_bool(const nlohmann::json& j, const char* key, bool* out);
Status get_positive_int(const nlohmann::json& j, const char* key, int64_t* out);
Status get_positive_double(const nlohmann::json& j, const char* key, double* out);
Status get_triple(const nlohmann::json& j, const char* key, std::array<double, 3>* out);
// PIL resample codes; 2 (bilinear) and 3 (bicubic) are what the uint8 kernels implement.
Status get_resample(const nlohmann::json& j, const char* key, ResizeFilter* out);
// An int, or an object {"height": h, "width": w} (HF accepts both for patch_size).
Status get_int_or_hw(const nlohmann::json& j, const char* key, int64_t* h, int64_t* w);

// image_processor_type, when present, must not name the other family's processor (`Pixtral...` vs
// `Qwen2VL...`) nor the PIL backend (`...Pil`, which resamples with Pillow): tensorfold reproduces the
// torchvision backend, Transformers 5's default.
Status check_processor_type(const nlohmann::json& j, const std::string& family_prefix);

struct NormalizeParams {
  bool do_rescale = true;
  bool do_normalize = true;
  double rescale_factor = 1.0 / 255.0;
  std::array<double, 3> image_mean{};
  std::array<double, 3> image_std{};
};

Status read_normalize_params(const nlohmann::json& j, NormalizeParams* p);

// [3, H, W] planes after resizing: uint8, or uint16 for a 16-bit source (see image.h).
struct ResizedPlanes {
  int height = 0, width = 0;
  std::vector<uint8_t> u8;    // [3, height, width] when the image is 8-bit
  std::vector<uint16_t> u16;  // [3, height, width] when the image is 16-bit
};

// torchvision's resize_image: a no-op when the size is unchanged, else the native uint8 kernel
// (8-bit) or the float path with a truncating cast back (16-bit).
ResizedPlanes resize_planes(const Image& image, int out_h, int out_w, ResizeFilter filter);

// [3, plane] uint8 (or uint16) -> [3, plane] f32, as TorchvisionBackend.rescale_and_normalize: with rescale
// and normalize, mean' = f32(mean) * f32(1 / rescale_factor) and std' likewise (f32 products), then (f32(x) -
// mean') / std' (a subtract then a true divide); normalize only: (x - mean) / std; rescale only: f32(x) *
// f32(rescale_factor); neither: f32(x).
void rescale_normalize(const ResizedPlanes& planes, float* out, const NormalizeParams& p);

}  // namespace tf::image_detail
