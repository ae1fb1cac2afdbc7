// tokenizer.json "normalizer": Unicode normalization forms (utf8proc) and Sequence of them; null = none.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tf::text {

class Normalizer {
 public:
  enum class Form { NFC, NFD, NFKC, NFKD };

  // `j` is the value of the "normalizer" key (may be null). Unknown types are refused by name.
  static Expected<Normalizer> from_json(const nlohmann::json& j);

  bool empty() const { return forms_.empty(); }
  // Input must be valid UTF-8.
  std::string normalize(std::string_view s) const;

 private:
  Status add(const nlohmann::json& j);
  std::vector<Form> forms_;
};

}  // namespace tf::text
