// tokenizer.json "pre_tokenizer": Split (regex or string, all delimiter behaviours, invert), ByteLevel
// (add_prefix_space, use_regex with the GPT-2 pattern) and Sequence of them.
#pragma once
#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "text/pretokenizer_regex.h"

namespace tf::text {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  // `j` is the value of "pre_tokenizer" (may be null). Unknown types are refused by name.
  static Expected<PreTokenizer> from_json(const nlohmann::json& j);

  // True when the pipeline ends with ByteLevel: the pieces are then raw bytes that the model maps to the
  // byte-level alphabet itself (no byte-level string is materialised).
  bool byte_level() const { return byte_level_; }

  // Splits `text` (valid UTF-8) into pieces; pieces point into `text` or into strings kept in `arena`.
  Status run(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& arena) const;

 private:
  struct Step {
    enum class Kind { Split, ByteLevel } kind;
    std::shared_ptr<const SplitRegex> re;  // Split's pattern, or GPT-2's for ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  Status add(const nlohmann::json& j);
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace tf::text
