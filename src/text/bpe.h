// tokenizer.json "model" of type BPE: vocab, merges (both serialisations), byte_fallback, ignore_merges,
// unk_token/fuse_unk, continuing_subword_prefix, end_of_word_suffix. Merging follows HF's Word::merge_all:
// lowest rank first, leftmost among equal ranks, with a heap (O(n log n) per word).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace tf::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  static Expected<BpeModel> from_json(const nlohmann::json& model);
  BpeModel() = default;
  BpeModel(BpeModel&& o) noexcept;
  BpeModel& operator=(BpeModel&& o) noexcept;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  size_t n_vocab() const { return vocab_.size(); }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

  // Appends the ids of one pre-token. With byte_level the piece holds raw bytes, each standing for its
  // byte-level alphabet character; otherwise it is the piece's text itself.
  void encode_word(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const;

 private:
  void encode_uncached(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& syms) const;
  void merge(std::vector<int32_t>& syms) const;

  TokenMap vocab_;
  std::vector<std::string> id_to_token_;  // "" for ids with no vocab entry
  std::vector<bool> has_id_;
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  std::unordered_map<uint64_t, MergeTarget> merges_;  // key: (left id << 32) | right id
  std::array<int32_t, 256> byte_ids_{};               // id of each byte's alphabet char, -1 if absent
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix

  static constexpr size_t kCacheMaxWordBytes = 256;
  static constexpr size_t kCacheCapacity = 1 << 17;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace tf::text
