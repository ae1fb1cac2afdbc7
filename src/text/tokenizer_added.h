// HF's AddedVocabulary matching: leftmost-longest search of added-token contents (as the Aho-Corasick
// automaton with MatchKind::LeftmostLongest does), then single_word / lstrip / rstrip adjustments.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tf::text {

struct AddedSplit {
  size_t b, e;  // byte range in the searched string
  int32_t id;   // -1 for plain text
};

class AddedMatcher {
 public:
  struct Pattern {
    std::string text;
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  void build(std::vector<Pattern> patterns);
  bool empty() const { return patterns_.empty(); }
  // Covers all of `s` with splits, as HF's find_matches (s is valid UTF-8).
  void split(std::string_view s, std::vector<AddedSplit>& out) const;

 private:
  std::vector<Pattern> patterns_;
  struct Node {
    int32_t pattern = -1;
  };
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child
  bool first_byte_[256] = {};
};

}  // namespace tf::text
