#include "models/lighton_ocr/processor.h"

#include "image/pixtral_image_processor.h"

namespace tf::lighton_ocr {
namespace {

class LightOnOcrImageProcessor final : public ImageProcessor {
 public:
  LightOnOcrImageProcessor(PixtralImageProcessor p, int64_t merge) : proc_(std::move(p)), merge_(merge) {
    const auto& c = proc_.config();
    desc_ = "pixtral longest=" + std::to_string(c.max_height) + "x" + std::to_string(c.max_width) +
            " patch=" + std::to_string(c.patch_height) + "x" + std::to_string(c.patch_width) +
            " merge=" + std::to_string(merge_) + " resample=" + std::to_string(static_cast<int>(c.resample)) +
            describe_normalize(c.normalize);
  }

  Expected<ProcessedImage> process(const Image& rgb, int index) const override {
    TF_ASSIGN(PixtralProcessedImage p, proc_.preprocess(rgb, index));
    ProcessedImage out;
    out.height = p.height;
    out.width = p.width;
    out.n_tokens = proc_.n_image_tokens(p.height, p.width, static_cast<int>(merge_));
    // Transformers 5.17 fails inside the patch merger for these (unfold of an empty grid); refuse
    // up front with a message the user can act on.
    if (out.n_tokens <= 0)
      return make_error("image " + std::to_string(index) + " is too small: it is " +
                        std::to_string(rgb.width) + "x" + std::to_string(rgb.height) +
                        " pixels and becomes " + std::to_string(p.width) + "x" + std::to_string(p.height) +
                        ", which gives no image tokens; send an image at least " +
                        std::to_string(proc_.config().patch_height * merge_) + " pixels on each side");
    out.pixel_values = std::move(p.pixel_values);
    out.identity = image_identity(rgb, desc_);
    return out;
  }
  const std::string& placeholder() const override { return placeholder_; }
  std::string describe() const override { return desc_; }

 private:
  PixtralImageProcessor proc_;
  int64_t merge_;
  std::string desc_;
  std::string placeholder_ = "<|image_pad|>";
};

}  // namespace

Expected<std::unique_ptr<ImageProcessor>> make_processor(const nlohmann::json& config,
                                                         const ModelInfo& info) {
  TF_ASSIGN(PixtralImageProcessor p, PixtralImageProcessor::from_json(config));
  return std::unique_ptr<ImageProcessor>(new LightOnOcrImageProcessor(std::move(p), info.spatial_merge_size));
}

}  // namespace tf::lighton_ocr
