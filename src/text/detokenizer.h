// Streaming decode: ids arrive one at a time, text leaves only as complete UTF-8, and the concatenation of
// all chunks (including finish()) equals Tokenizer::decode of all the ids.
#pragma once
#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace tf {

class IncrementalDetokenizer {
 public:
  // `tok` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens);

  // Returns the text that became final with this id (possibly empty). Bytes that may still start a
  // multi-byte character are held back until the next id decides them.
  std::string push(int32_t id);
  // Flushes what is held back (an unfinished character becomes U+FFFD, as decode() does).
  std::string finish();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  bool first_ = true;
  std::string pending_;  // undecided bytes: at most 3, a proper prefix of a UTF-8 sequence
};

}  // namespace tf
