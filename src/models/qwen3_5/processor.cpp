#include "models/qwen3_5/processor.h"

#include "image/qwen2_vl_image_processor.h"

namespace tf::qwen3_5 {
namespace {

class Qwen35ImageProcessor final : public ImageProcessor {
 public:
  explicit Qwen35ImageProcessor(Qwen2VLImageProcessor p) : proc_(std::move(p)) {
    const auto& c = proc_.config();
    desc_ = "qwen2_vl min_pixels=" + std::to_string(c.min_pixels) +
            " max_pixels=" + std::to_string(c.max_pixels) + " patch=" + std::to_string(c.patch_size) +
            " temporal=" + std::to_string(c.temporal_patch_size) + " merge=" + std::to_string(c.merge_size) +
            " resample=" + std::to_string(static_cast<int>(c.resample)) + describe_normalize(c.normalize);
  }

  Expected<ProcessedImage> process(const Image& rgb, int index) const override {
    TF_ASSIGN(Qwen2VLProcessedImage p, proc_.preprocess(rgb, index));
    ProcessedImage out;
    out.height = p.height;
    out.width = p.width;
    out.grid_thw.assign(p.grid_thw.begin(), p.grid_thw.end());
    out.n_tokens = p.n_image_tokens;
    out.pixel_values = std::move(p.pixel_values);
    out.identity = image_identity(rgb, desc_);
    return out;
  }
  const std::string& placeholder() const override { return placeholder_; }
  std::string describe() const override { return desc_; }

 private:
  Qwen2VLImageProcessor proc_;
  std::string desc_;
  std::string placeholder_ = "<|image_pad|>";
};

}  // namespace

Expected<std::unique_ptr<ImageProcessor>> make_processor(const nlohmann::json& config, const ModelInfo&) {
  TF_ASSIGN(Qwen2VLImageProcessor p, Qwen2VLImageProcessor::from_json(config));
  return std::unique_ptr<ImageProcessor>(new Qwen35ImageProcessor(std::move(p)));
}

}  // namespace tf::qwen3_5
