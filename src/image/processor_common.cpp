#include "image/processor_common.h"

namespace tf::image_detail {
namespace {

Error bad(const char* key, const std::string& what) {
  return Error{std::string("preprocessor_config.json: ") + key + " " + what};
}

}  // namespace

Status get_bool(const nlohmann::json& j, const char* key, bool* out) {
  if (!j.contains(key) || j[key].is_null()) return {};
  if (!j[key].is_boolean()) return bad(key, "must be true or false, got " + j[key].dump());
  *out = j[key].get<bool>();
  return {};
}

Status get_positive_int(const nlohmann::json& j, const char* key, int64_t* out) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    return bad(key, "must be a positive integer, got " + v.dump());
  *out = v.get<int64_t>();
  return {};
}

Status get_positive_double(const nlohmann::json& j, const char* key, double* out) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const auto& v = j[key];
  if (!v.is_number() || !(v.get<double>() > 0.0))
    return bad(key, "must be a positive number, got " + v.dump());
  *out = v.get<double>();
  return {};
}

Status get_triple(const nlohmann::json& j, const char* key, std::array<double, 3>* out) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const auto& v = j[key];
  if (v.is_number()) {  // HF broadcasts a single float to every channel
    out->fill(v.get<double>());
    return {};
  }
  if (!v.is_array() || v.size() != 3) return bad(key, "must be a list of 3 numbers, got " + v.dump());
  for (size_t i = 0; i < 3; ++i) {
    if (!v[i].is_number()) return bad(key, "must be a list of 3 numbers, got " + v.dump());
    (*out)[i] = v[i].get<double>();
  }
  return {};
}

Status get_resample(const nlohmann::json& j, const char* key, ResizeFilter* out) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const auto& v = j[key];
  if (!v.is_number_integer()) return bad(key, "must be a PIL resample code, got " + v.dump());
  switch (v.get<int64_t>()) {
    case 2:
      *out = ResizeFilter::bilinear;
      return {};
    case 3:
      *out = ResizeFilter::bicubic;
      return {};
    default:
      return bad(key, "is " + v.dump() + "; tensorfold implements 2 (bilinear) and 3 (bicubic)");
  }
}

Status get_int_or_hw(const nlohmann::json& j, const char* key, int64_t* h, int64_t* w) {
  if (!j.contains(key) || j[key].is_null()) return {};
  const auto& v = j[key];
  if (v.is_number_integer() && v.get<int64_t>() > 0) {
    *h = *w = v.get<int64_t>();
    return {};
  }
  if (v.is_object() && v.contains("height") && v.contains("width") && v["height"].is_number_integer() &&
      v["width"].is_number_integer() && v["height"].get<int64_t>() > 0 && v["width"].get<int64_t>() > 0) {
    *h = v["height"].get<int64_t>();
    *w = v["width"].get<int64_t>();
    return {};
  }
  return bad(key, "must be a positive integer or {\"height\": h, \"width\": w}, got " + v.dump());
}

Status check_processor_type(const nlohmann::json& j, const std::string& family_prefix) {
  if (!j.contains("image_processor_type") || j["image_processor_type"].is_null()) return {};
  const auto& v = j["image_processor_type"];
  if (!v.is_string()) return bad("image_processor_type", "must be a string, got " + v.dump());
  const std::string name = v.get<std::string>();
  // Only a known other family is a certain mismatch; unknown names (subclasses, renames) are accepted.
  for (const char* other : {"Pixtral", "Qwen2VL"}) {
    if (family_prefix != other && name.rfind(other, 0) == 0)
      return bad("image_processor_type",
                 "is " + name + "; expected " + family_prefix + "ImageProcessor(Fast)");
  }
  if (name.size() >= 3 && name.compare(name.size() - 3, 3, "Pil") == 0)
    return bad("image_processor_type",
               "is " + name + " (the PIL backend); tensorfold reproduces the torchvision backend, " +
                   family_prefix + "ImageProcessor(Fast)");
  return {};
}

Status read_normalize_params(const nlohmann::json& j, NormalizeParams* p) {
  TF_TRY(get_bool(j, "do_rescale", &p->do_rescale));
  TF_TRY(get_bool(j, "do_normalize", &p->do_normalize));
  TF_TRY(get_positive_double(j, "rescale_factor", &p->rescale_factor));
  TF_TRY(get_triple(j, "image_mean", &p->image_mean));
  TF_TRY(get_triple(j, "image_std", &p->image_std));
  for (double s : p->image_std)
    if (s == 0.0) return Error{"preprocessor_config.json: image_std has a zero entry"};
  return {};
}

ResizedPlanes resize_planes(const Image& image, int out_h, int out_w, ResizeFilter filter) {
  ResizedPlanes r;
  r.height = out_h;
  r.width = out_w;
  if (image.bit_depth == 16) {
    r.u16 = resize_aa_u16(image_to_chw16(image), 3, image.height, image.width, out_h, out_w, filter);
  } else {
    r.u8 = resize_aa_u8(image_to_chw(image), 3, image.height, image.width, out_h, out_w, filter);
  }
  return r;
}

namespace {

template <class T>
void normalize_planes(const T* chw, int64_t plane, float* out, const NormalizeParams& p) {
  for (int c = 0; c < 3; ++c) {
    const T* in = chw + c * plane;
    float* o = out + c * plane;
    if (p.do_normalize) {
      float mean = static_cast<float>(p.image_mean[c]);
      float std = static_cast<float>(p.image_std[c]);
      if (p.do_rescale) {
        // torch.tensor(mean) * (1.0 / rescale_factor): f32 tensor times a scalar taken as f32.
        const float inv = static_cast<float>(1.0 / p.rescale_factor);
        mean = mean * inv;
        std = std * inv;
      }
      for (int64_t i = 0; i < plane; ++i) o[i] = (static_cast<float>(in[i]) - mean) / std;
    } else if (p.do_rescale) {
      const float s = static_cast<float>(p.rescale_factor);
      for (int64_t i = 0; i < plane; ++i) o[i] = static_cast<float>(in[i]) * s;
    } else {
      for (int64_t i = 0; i < plane; ++i) o[i] = static_cast<float>(in[i]);
    }
  }
}

}  // namespace

void rescale_normalize(const ResizedPlanes& planes, float* out, const NormalizeParams& p) {
  const int64_t plane = static_cast<int64_t>(planes.height) * planes.width;
  if (!planes.u16.empty()) {
    normalize_planes(planes.u16.data(), plane, out, p);
  } else {
    normalize_planes(planes.u8.data(), plane, out, p);
  }
}

}  // namespace tf::image_detail
