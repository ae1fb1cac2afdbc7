#include "io/hf_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tf {
namespace {

using Json = nlohmann::json;

std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string brief(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

Expected<Json> parse_json_text(std::string_view text, const std::string& label) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    std::string what = e.what();
    size_t close = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos) what = what.substr(close + 2);
    return make_error(label + ": not valid JSON: " + what);
  } catch (const std::exception& e) {
    return make_error(label + ": cannot parse: " + e.what());
  }
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);  // follows symlinks (HF cache blobs)
}

bool is_int(const Json& v) { return v.is_number_integer(); }
int64_t to_int(const Json& v) {
  return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}
bool fits_int64(const Json& v) {
  return !v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
}

}  // namespace

Expected<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(path + ": read failed");
  return parse_json_text(ss.str(), base_name(path));
}

JsonConfig::JsonConfig() : JsonConfig(std::make_shared<const Json>(Json::object()), nullptr, "<none>", "") {}

JsonConfig::JsonConfig(std::shared_ptr<const Json> root, const Json* node, std::string file, std::string path)
    : root_(std::move(root)),
      node_(node ? node : root_.get()),
      file_(std::move(file)),
      path_(std::move(path)) {}

Expected<JsonConfig> JsonConfig::from_json(Json root, std::string file) {
  if (!root.is_object()) return make_error(file + ": must hold a JSON object, got " + brief(root));
  auto shared = std::make_shared<const Json>(std::move(root));
  return JsonConfig(shared, nullptr, std::move(file), "");
}

Expected<JsonConfig> JsonConfig::parse(std::string_view text, std::string file) {
  TF_ASSIGN(Json j, parse_json_text(text, file));
  return from_json(std::move(j), std::move(file));
}

Expected<JsonConfig> JsonConfig::load(const std::string& path) {
  TF_ASSIGN(Json j, read_json_file(path));
  return from_json(std::move(j), base_name(path));
}

std::string JsonConfig::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Error JsonConfig::error(std::string_view key, const std::string& what) const {
  return make_error(file_ + ": " + field(key) + " " + what);
}

const Json* JsonConfig::find(std::string_view key) const {
  auto it = node_->find(std::string(key));
  if (it == node_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonConfig::has(std::string_view key) const { return find(key) != nullptr; }

std::vector<std::string> JsonConfig::keys() const {
  std::vector<std::string> out;
  for (auto it = node_->begin(); it != node_->end(); ++it) out.push_back(it.key());
  return out;
}

namespace {
// "is missing" or "is missing (null)", depending on which.
std::string missing_what(const Json& node, std::string_view key) {
  return node.contains(std::string(key)) ? "is missing (null)" : "is missing";
}
}  // namespace

Expected<JsonConfig> JsonConfig::object(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!v->is_object()) return error(key, "must be an object, got " + brief(*v));
  return JsonConfig(root_, v, file_, field(key));
}

Expected<std::optional<JsonConfig>> JsonConfig::object_if(std::string_view key) const {
  if (!find(key)) return std::optional<JsonConfig>();
  TF_ASSIGN(JsonConfig c, object(key));
  return std::optional<JsonConfig>(std::move(c));
}

Expected<int64_t> JsonConfig::get_int(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!is_int(*v) || !fits_int64(*v)) return error(key, "must be an integer, got " + brief(*v));
  return to_int(*v);
}

Expected<int64_t> JsonConfig::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : Expected<int64_t>(fallback);
}

Expected<int64_t> JsonConfig::get_positive_int(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!is_int(*v) || !fits_int64(*v) || to_int(*v) <= 0)
    return error(key, "must be a positive integer, got " + brief(*v));
  return to_int(*v);
}

Expected<int64_t> JsonConfig::get_positive_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_positive_int(key) : Expected<int64_t>(fallback);
}

Expected<double> JsonConfig::get_number(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!v->is_number()) return error(key, "must be a number, got " + brief(*v));
  return v->get<double>();
}

Expected<double> JsonConfig::get_number(std::string_view key, double fallback) const {
  return has(key) ? get_number(key) : Expected<double>(fallback);
}

Expected<bool> JsonConfig::get_bool(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!v->is_boolean()) return error(key, "must be true or false, got " + brief(*v));
  return v->get<bool>();
}

Expected<bool> JsonConfig::get_bool(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Expected<bool>(fallback);
}

Expected<std::string> JsonConfig::get_string(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (!v->is_string()) return error(key, "must be a string, got " + brief(*v));
  return v->get<std::string>();
}

Expected<std::string> JsonConfig::get_string(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : Expected<std::string>(fallback);
}

Expected<std::vector<int64_t>> JsonConfig::get_int_list(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  std::vector<int64_t> out;
  bool ok = v->is_array();
  if (ok)
    for (const Json& e : *v) {
      if (!is_int(e) || !fits_int64(e)) {
        ok = false;
        break;
      }
      out.push_back(to_int(e));
    }
  if (!ok) return error(key, "must be a list of integers, got " + brief(*v));
  return out;
}

Expected<std::vector<int64_t>> JsonConfig::get_int_list(std::string_view key,
                                                        const std::vector<int64_t>& fallback) const {
  return has(key) ? get_int_list(key) : Expected<std::vector<int64_t>>(fallback);
}

Expected<std::vector<int64_t>> JsonConfig::get_ids(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  if (is_int(*v) && fits_int64(*v)) return std::vector<int64_t>{to_int(*v)};
  if (!v->is_array()) return error(key, "must be an integer or a list of integers, got " + brief(*v));
  auto list = get_int_list(key);
  if (!list.ok()) return error(key, "must be an integer or a list of integers, got " + brief(*v));
  return list;
}

Expected<std::vector<int64_t>> JsonConfig::get_ids(std::string_view key,
                                                   const std::vector<int64_t>& fallback) const {
  return has(key) ? get_ids(key) : Expected<std::vector<int64_t>>(fallback);
}

Expected<std::vector<double>> JsonConfig::get_number_list(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  std::vector<double> out;
  bool ok = v->is_array();
  if (ok)
    for (const Json& e : *v) {
      if (!e.is_number()) {
        ok = false;
        break;
      }
      out.push_back(e.get<double>());
    }
  if (!ok) return error(key, "must be a list of numbers, got " + brief(*v));
  return out;
}

Expected<std::vector<double>> JsonConfig::get_number_list(std::string_view key,
                                                          const std::vector<double>& fallback) const {
  return has(key) ? get_number_list(key) : Expected<std::vector<double>>(fallback);
}

Expected<std::vector<std::string>> JsonConfig::get_string_list(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return error(key, missing_what(*node_, key));
  std::vector<std::string> out;
  bool ok = v->is_array();
  if (ok)
    for (const Json& e : *v) {
      if (!e.is_string()) {
        ok = false;
        break;
      }
      out.push_back(e.get<std::string>());
    }
  if (!ok) return error(key, "must be a list of strings, got " + brief(*v));
  return out;
}

Expected<std::vector<std::string>> JsonConfig::get_string_list(
    std::string_view key, const std::vector<std::string>& fallback) const {
  return has(key) ? get_string_list(key) : Expected<std::vector<std::string>>(fallback);
}

namespace {
Expected<std::optional<JsonConfig>> load_optional(const std::string& dir, const char* name) {
  std::string path = dir + "/" + name;
  if (!is_file(path)) return std::optional<JsonConfig>();
  TF_ASSIGN(JsonConfig c, JsonConfig::load(path));
  return std::optional<JsonConfig>(std::move(c));
}
}  // namespace

Expected<HfConfigs> load_hf_configs(const std::string& dir) {
  HfConfigs out;
  std::string config_path = dir + "/config.json";
  if (!is_file(config_path))
    return make_error(dir + ": no config.json (not a Hugging Face checkpoint directory?)");
  TF_ASSIGN(out.config, JsonConfig::load(config_path));
  TF_ASSIGN(out.generation_config, load_optional(dir, "generation_config.json"));
  TF_ASSIGN(out.tokenizer_config, load_optional(dir, "tokenizer_config.json"));
  TF_ASSIGN(out.preprocessor_config, load_optional(dir, "preprocessor_config.json"));
  TF_ASSIGN(out.processor_config, load_optional(dir, "processor_config.json"));
  // Transformers' ImageProcessingMixin.get_image_processor_dict: the nested config wins.
  if (out.processor_config) {
    TF_ASSIGN(out.image_processor_config, out.processor_config->object_if("image_processor"));
  }
  if (!out.image_processor_config) out.image_processor_config = out.preprocessor_config;
  return out;
}

}  // namespace tf
