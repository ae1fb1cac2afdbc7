#include "text/pretokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tf::text {

namespace {

// The pattern HF's ByteLevel pre-tokenizer splits with when use_regex is true (pre_tokenizers/byte_level.rs).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Seg {
  size_t b, e;
  bool match;
};

// HF's NormalizedString::split: turn the match list into pieces according to the behaviour.
void apply_behavior(std::vector<Seg>& segs, SplitBehavior behavior, std::string_view piece,
                    std::vector<std::string_view>& out) {
  std::vector<Seg> acc;
  acc.reserve(segs.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      acc = segs;
      break;
    case SplitBehavior::Removed:
      for (const auto& s : segs)
        if (!s.match) acc.push_back(s);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const auto& s : segs) {
        if (s.match && !prev_match && !acc.empty()) {
          acc.back().e = s.e;
        } else {
          acc.push_back(s);
        }
        prev_match = s.match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const auto& s = segs[k];
        if (s.match && !prev_match && !acc.empty()) {
          acc.back().b = s.b;
        } else {
          acc.push_back(s);
        }
        prev_match = s.match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool prev_match = false;
      for (const auto& s : segs) {
        if (s.match == prev_match && !acc.empty()) {
          acc.back().e = s.e;
        } else {
          acc.push_back(s);
        }
        prev_match = s.match;
      }
      break;
    }
  }
  for (const auto& s : acc)
    if (s.e > s.b) out.push_back(piece.substr(s.b, s.e - s.b));
}

Status split_piece(const SplitRegex& re, SplitBehavior behavior, bool invert, std::string_view piece,
                   std::vector<std::pair<size_t, size_t>>& scratch, std::vector<Seg>& segs,
                   std::vector<std::string_view>& out) {
  scratch.clear();
  segs.clear();
  TF_TRY(re.find_all(piece, scratch));
  size_t prev = 0;
  for (const auto& [b, e] : scratch) {
    if (prev != b) segs.push_back({prev, b, invert});
    segs.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != piece.size()) segs.push_back({prev, piece.size(), invert});
  if (behavior == SplitBehavior::Isolated) {
    for (const auto& s : segs)
      if (s.e > s.b) out.push_back(piece.substr(s.b, s.e - s.b));
    return {};
  }
  apply_behavior(segs, behavior, piece, out);
  return {};
}

Expected<SplitBehavior> parse_behavior(const nlohmann::json& j) {
  if (!j.is_string()) return make_error("tokenizer.json: Split pre-tokenizer without a \"behavior\"");
  const std::string b = j.get<std::string>();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  return make_error("tokenizer.json: Split behavior '" + b + "' is not supported");
}

}  // namespace

Status PreTokenizer::add(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return make_error("tokenizer.json: pre_tokenizer without a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (byte_level_)
    return make_error("tokenizer.json: pre-tokenizer '" + type + "' after ByteLevel is not supported");
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return make_error("tokenizer.json: pre_tokenizer Sequence without a \"pretokenizers\" array");
    for (const auto& sub : j["pretokenizers"]) TF_TRY(add(sub));
    return {};
  }
  Step step;
  if (type == "Split") {
    step.kind = Step::Kind::Split;
    const auto& pat = j.value("pattern", nlohmann::json());
    bool literal;
    std::string text;
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) {
      literal = false;
      text = pat["Regex"].get<std::string>();
    } else if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
      literal = true;
      text = pat["String"].get<std::string>();
    } else {
      return make_error(
          "tokenizer.json: Split pre-tokenizer needs a pattern {\"Regex\": ...} or {\"String\": ...}");
    }
    TF_ASSIGN(step.re, SplitRegex::compile(text, literal));
    TF_ASSIGN(step.behavior, parse_behavior(j.value("behavior", nlohmann::json())));
    const auto& inv = j.value("invert", nlohmann::json(false));
    step.invert = inv.is_boolean() && inv.get<bool>();
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::ByteLevel;
    // HF's serde defaults: add_prefix_space true, use_regex true.
    const auto aps = j.value("add_prefix_space", nlohmann::json(true));
    const auto ur = j.value("use_regex", nlohmann::json(true));
    step.add_prefix_space = aps.is_boolean() ? aps.get<bool>() : true;
    if (!ur.is_boolean() || ur.get<bool>()) {
      TF_ASSIGN(step.re, SplitRegex::compile(kGpt2Pattern, false));
    }
    byte_level_ = true;
  } else {
    return make_error("tokenizer.json: pre_tokenizer type '" + type + "' is not supported");
  }
  steps_.push_back(std::move(step));
  return {};
}

Expected<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  if (j.is_null()) return p;
  TF_TRY(p.add(j));
  return p;
}

Status PreTokenizer::run(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& arena) const {
  pieces.clear();
  if (!text.empty()) pieces.push_back(text);
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> scratch;
  std::vector<Seg> segs;
  for (const auto& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (step.kind == Step::Kind::ByteLevel) {
        if (step.add_prefix_space && piece.front() != ' ') {
          arena.emplace_back();
          arena.back().reserve(piece.size() + 1);
          arena.back() += ' ';
          arena.back() += piece;
          piece = arena.back();
        }
        if (!step.re) {
          next.push_back(piece);
          continue;
        }
        TF_TRY(split_piece(*step.re, SplitBehavior::Isolated, false, piece, scratch, segs, next));
      } else {
        TF_TRY(split_piece(*step.re, step.behavior, step.invert, piece, scratch, segs, next));
      }
    }
    pieces.swap(next);
  }
  return {};
}

}  // namespace tf::text
