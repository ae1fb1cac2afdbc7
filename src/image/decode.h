// Image decoding as Transformers 5.17 loads an image, PNG (libpng), JPEG (libjpeg-turbo) and WebP
// (libwebp), sniffed by magic bytes. Two modes:
//
// DecodeMode::chat (default) = what the chat-template path runs for {"type": "image", "url"|"path"|
// "base64"} content: image_utils.load_image_as_tensor -> torchvision.io.decode_image(mode=RGB).
//   No EXIF orientation. Palette PNGs expand through libpng's png_set_palette_to_rgb; tRNS and
//   alpha are stripped; 16-bit PNGs stay 16-bit (Image::bit_depth 16, gray replicated); CMYK/YCCK JPEGs
//   are converted as torchvision does (the same formula as PIL, below). Everything else as below.
//
// DecodeMode::pil = transformers.image_utils.load_image (pipelines): PIL.Image.open,
// ImageOps.exif_transpose, convert("RGB"). Conversions follow Pillow's, bit for bit:
//   L, LA, 1-, 2-, 4-bit gray   -> gray replicated (low depths scaled by bit replication, as PIL's L;2/L;4)
//   LA, RGBA (8/16 bit)         -> alpha dropped, no compositing (convert("RGB") ignores alpha)
//   16-bit RGB/RGBA/LA          -> the most significant byte (PIL's RGB;16B / RGBA;16B / LA;16B unpackers)
//   16-bit gray (PIL "I;16")    -> min(value, 255) replicated (Pillow's I16_RGB saturates, it does not scale)
//   P (palette, with or w/o tRNS) -> palette colour, transparency ignored; indices past the PLTE entries
//                                 give (i, i, i) like Pillow's default ramp palette
//   JPEG                        -> libjpeg ISLOW IDCT with fancy upsampling (PIL's defaults); CMYK and YCCK
//                                 as PIL: inverted ("CMYK;I", Adobe convention) then cmyk2rgb
//   WebP                        -> decoded to RGBA, alpha dropped (animations refused in both modes;
//                                 torchvision refuses them too, Pillow would take the first frame)
// EXIF orientation (JPEG APP1, PNG eXIf, WebP EXIF chunk) is applied as ImageOps.exif_transpose does
// (the XMP tiff:Orientation fallback of Pillow's getexif is not implemented).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "image/image.h"

namespace tf {

enum class ImageFormat { unknown, png, jpeg, webp };
enum class DecodeMode { chat, pil };

ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
std::string_view image_format_name(ImageFormat f);

// index_for_messages numbers the image in error messages ("image 2 could not be decoded; ...").
Expected<Image> decode_image(std::span<const uint8_t> bytes, int index_for_messages, ImageLimits limits = {},
                             DecodeMode mode = DecodeMode::chat);

}  // namespace tf
