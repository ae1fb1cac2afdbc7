// tf::Tokenizer: Hugging Face tokenizer.json (BPE), computing the ids HF tokenizers computes.
//
// Supported: model BPE; normalizers NFC/NFD/NFKC/NFKD/Sequence/null; pre-tokenizers Split/ByteLevel/Sequence;
// added tokens with special/lstrip/rstrip/single_word/normalized; post-processors ByteLevel,
// TemplateProcessing, BertProcessing, RobertaProcessing, Sequence, null; decoder ByteLevel or null.
// Anything else is refused at load with an error naming the component.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tf {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = true;
};

class Tokenizer {
 public:
  // Reads tokenizer.json as published; tokenizer_config.json (optional, "" = none) supplies the names of the
  // bos/eos/pad/unk tokens.
  static Expected<Tokenizer> load(const std::string& tokenizer_json_path,
                                  const std::string& tokenizer_config_path = "");
  static Expected<Tokenizer> from_json_text(std::string_view tokenizer_json,
                                            std::string_view tokenizer_config = "");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8 (HF's API takes Python/JS strings, which cannot hold anything else); invalid
  // input is an error naming the byte offset. Added tokens in the text are always recognised;
  // add_special_tokens applies the post-processor's template (bos/eos), as HF's encode does.
  // Safe to call from several threads at once.
  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;

  // HF's decode: ids without a token are dropped, skip_special_tokens drops special added tokens, then the
  // decoder runs (ByteLevel: bytes back to text, invalid UTF-8 replaced by U+FFFD like from_utf8_lossy).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One more than the largest id of the model vocab and the added tokens.
  size_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // True for added tokens marked "special" (the ones skip_special_tokens drops).
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  std::optional<int32_t> unk_token_id() const;

  // For streaming: appends the bytes token `id` contributes to the decoder's output stream (before the
  // final UTF-8 repair). `first` says whether an earlier token was already emitted (the null decoder joins
  // with spaces). Returns false, appending nothing, for a token decode() would drop.
  bool append_token_bytes(int32_t id, bool skip_special_tokens, bool first, std::string& out) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tf
