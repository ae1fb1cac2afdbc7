// Typed, checked access to Hugging Face JSON files (config.json, generation_config.json,
// tokenizer_config.json, preprocessor_config.json, processor_config.json).
//
// A JsonConfig is a view of one JSON object inside a file; it remembers the file name and the
// path from the root so every error names the field exactly:
//   "config.json: text_config.hidden_size is missing"
//   "config.json: text_config.hidden_size must be a positive integer, got \"abc\""
// A key holding null counts as absent (HF writes null for unset options), so getters with a
// fallback return the fallback for it and required getters report "is missing (null)".
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tf {

// Reads and parses a JSON file. Errors: "PATH: cannot read: ...", "config.json: not valid JSON: ...".
// Messages name the file by its base name (they are fixed names inside a checkpoint directory).
Expected<nlohmann::json> read_json_file(const std::string& path);

class JsonConfig {
 public:
  JsonConfig();  // an empty object labelled "<none>"
  // A view of the whole document; `file` labels errors. The root must be a JSON object.
  static Expected<JsonConfig> from_json(nlohmann::json root, std::string file);
  static Expected<JsonConfig> parse(std::string_view text, std::string file);
  static Expected<JsonConfig> load(const std::string& path);  // file label = base name of path

  const nlohmann::json& json() const { return *node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }  // "" at the root, "text_config" below it
  std::string field(std::string_view key) const;     // "text_config.hidden_size"
  // "config.json: text_config.hidden_size <what>"
  Error error(std::string_view key, const std::string& what) const;

  bool has(std::string_view key) const;   // present and not null
  std::vector<std::string> keys() const;  // sorted

  // Sub-objects: required; or absent -> nullopt (present but not an object is still an error).
  Expected<JsonConfig> object(std::string_view key) const;
  Expected<std::optional<JsonConfig>> object_if(std::string_view key) const;

  // Required getters (absent/null -> "is missing") and getters with a fallback.
  Expected<int64_t> get_int(std::string_view key) const;
  Expected<int64_t> get_int(std::string_view key, int64_t fallback) const;
  Expected<int64_t> get_positive_int(std::string_view key) const;  // > 0
  Expected<int64_t> get_positive_int(std::string_view key, int64_t fallback) const;
  Expected<double> get_number(std::string_view key) const;  // integers are accepted as numbers
  Expected<double> get_number(std::string_view key, double fallback) const;
  Expected<bool> get_bool(std::string_view key) const;
  Expected<bool> get_bool(std::string_view key, bool fallback) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key, const std::string& fallback) const;
  Expected<std::vector<int64_t>> get_int_list(std::string_view key) const;
  Expected<std::vector<int64_t>> get_int_list(std::string_view key,
                                              const std::vector<int64_t>& fallback) const;
  // An integer or a list of integers, as eos_token_id is written ("eos_token_id": 2 or [1, 2]).
  Expected<std::vector<int64_t>> get_ids(std::string_view key) const;
  Expected<std::vector<int64_t>> get_ids(std::string_view key, const std::vector<int64_t>& fallback) const;
  Expected<std::vector<double>> get_number_list(std::string_view key) const;
  Expected<std::vector<double>> get_number_list(std::string_view key,
                                                const std::vector<double>& fallback) const;
  Expected<std::vector<std::string>> get_string_list(std::string_view key) const;
  Expected<std::vector<std::string>> get_string_list(std::string_view key,
                                                     const std::vector<std::string>& fallback) const;

 private:
  JsonConfig(std::shared_ptr<const nlohmann::json> root, const nlohmann::json* node, std::string file,
             std::string path);
  const nlohmann::json* find(std::string_view key) const;  // nullptr if absent or null

  std::shared_ptr<const nlohmann::json> root_;  // keeps the document alive for sub-views
  const nlohmann::json* node_ = nullptr;
  std::string file_;
  std::string path_;
};

// The optional companions of config.json in a checkpoint directory. Absent files are nullopt;
// present but malformed files are errors.
struct HfConfigs {
  JsonConfig config;                              // config.json (required)
  std::optional<JsonConfig> generation_config;    // generation_config.json
  std::optional<JsonConfig> tokenizer_config;     // tokenizer_config.json
  std::optional<JsonConfig> preprocessor_config;  // preprocessor_config.json as written
  std::optional<JsonConfig> processor_config;     // processor_config.json as written
  // The image processor settings as Transformers resolves them: processor_config.json's nested
  // "image_processor" object if it has one, else preprocessor_config.json.
  std::optional<JsonConfig> image_processor_config;
};
Expected<HfConfigs> load_hf_configs(const std::string& dir);

}  // namespace tf
