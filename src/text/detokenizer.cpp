#include "text/detokenizer.h"

#include "text/unicode.h"

namespace tf {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (tok_->append_token_bytes(id, skip_special_, first_, pending_)) first_ = false;
  // Lossy UTF-8 repair is local: a byte run is final unless it is a proper prefix of a well-formed
  // sequence at the very end, so emitting everything before such a tail matches decoding all at once.
  const size_t hold = text::utf8_incomplete_tail(pending_);
  std::string out;
  text::utf8_lossy_append(out, std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out = text::utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace tf
