// torch.nn.functional.interpolate(uint8 [N, C, H, W], size, mode="bicubic"|"bilinear",
// align_corners=False, antialias=True) on CPU, bit for bit: what torchvision's resize runs for a
// uint8 tensor (TorchvisionBackend.resize in Transformers' image processors).
//
// PyTorch's uint8 path (aten/src/ATen/native/cpu/UpSampleKernel.cpp, HelperInterpBase and
// UpSampleKernelAVXAntialias.h) is a Pillow-SIMD style separable resample:
//   - per axis, scale = in / out (double); support = (interp_size / 2) * max(scale, 1); for each
//     output i: center = scale * (i + 0.5), xmin = max(trunc(center - support + 0.5), 0),
//     xsize = min(trunc(center + support + 0.5), in) - xmin, weights filter((j + xmin - center + 0.5)
//     / max(scale, 1)) normalized by their sum (double); filters: Keys cubic a = -0.5 (its polynomial
//     fused-multiply-added, as PyTorch's -mfma kernel builds compute it; in double this never changed an
//     int16 weight over 6295 size pairs tried, but it does matter in the float32 path below), triangle;
//   - one precision per axis from the largest weight: the largest p < 22 with
//     round(w_max * 2^(p + 1)) < 2^15 is too big, i.e. the loop stops at the first p where it is not;
//     int16 weights = trunc(w * 2^p +- 0.5);
//   - acc = 2^(p - 1) + sum(pixel * weight) in int32, then clamp(acc >> p, 0, 255);
//   - the horizontal pass runs first into a uint8 buffer, then the vertical pass; an axis whose size
//     does not change is skipped, and an unchanged size is a plain copy.
// The AVX2 kernels and the scalar fallback compute the same integers, so one implementation covers both.
// Rows are spread over global_pool() (results do not depend on the thread count); like every user of
// that pool, call it from one thread at a time and never from inside a parallel_for body.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace tf {

enum class ResizeFilter { bilinear, bicubic };

// Per-axis resampling plan: exposed for tests and for anyone who wants to inspect weights.
struct AxisResample {
  int in_size = 0, out_size = 0;
  int ksize = 0;                 // weights stored per output index (PyTorch's max_interp_size)
  int precision = 0;             // fixed-point bits
  std::vector<int> xmin;         // [out_size]
  std::vector<int> xsize;        // [out_size]
  std::vector<int16_t> weights;  // [out_size, ksize]
};

AxisResample plan_axis_resample(int in_size, int out_size, ResizeFilter filter);

// planes: [channels, height, width] uint8 -> [channels, out_h, out_w] uint8. Sizes must be >= 1.
std::vector<uint8_t> resize_aa_u8(std::span<const uint8_t> planes, int channels, int height, int width,
                                  int out_h, int out_w, ResizeFilter filter);

// The same interpolate on float32 planes: PyTorch's generic separable kernel with float32 weights
// (scale, support and centre rounded to float, weights normalized in float) and a float dot product
// t0*w0 + t1*w1 + ... in tap order; no intermediate rounding between the passes.
std::vector<float> resize_aa_f32(std::span<const float> planes, int channels, int height, int width,
                                 int out_h, int out_w, ResizeFilter filter);

// torchvision's resize_image on uint16 planes (16-bit PNGs in Transformers' chat path): cast to f32,
// resize_aa_f32, then .to(uint16) with neither clamp nor rounding.
std::vector<uint16_t> resize_aa_u16(std::span<const uint16_t> planes, int channels, int height, int width,
                                    int out_h, int out_w, ResizeFilter filter);

}  // namespace tf
