// Private state of tf::Tokenizer, shared by tokenizer.cpp (encode/decode) and tokenizer_load.cpp (parsing).
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/normalizer.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/tokenizer_added.h"

namespace tf {

struct Tokenizer::Impl {
  text::BpeModel model;
  text::Normalizer normalizer;
  text::PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added;                    // as listed in tokenizer.json
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index in `added`
  text::TokenMap added_by_content;
  text::AddedMatcher raw_matcher;         // added tokens with normalized=false, matched on the input
  text::AddedMatcher normalized_matcher;  // normalized=true, matched after normalization

  // Post-processor, flattened: ids put before and after the sequence when add_special_tokens.
  std::vector<int32_t> prefix_ids, suffix_ids;

  enum class Decoder { None, ByteLevel } decoder = Decoder::None;

  std::optional<int32_t> bos, eos, pad, unk;
  size_t vocab_size = 0;
};

}  // namespace tf
