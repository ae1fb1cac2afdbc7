#include "text/tokenizer.h"

#include <deque>

#include "text/tokenizer_impl.h"
#include "text/unicode.h"

namespace tf {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// Pre-tokenizes one plain-text segment (no added tokens inside) and runs the model on each piece.
Status encode_segment(const Tokenizer::Impl& im, std::string_view seg, std::vector<std::string_view>& pieces,
                      std::deque<std::string>& arena, std::vector<int32_t>& ids) {
  TF_TRY(im.pre_tokenizer.run(seg, pieces, arena));
  const bool byte_level = im.pre_tokenizer.byte_level();
  for (std::string_view p : pieces) im.model.encode_word(p, byte_level, ids);
  return {};
}

}  // namespace

Expected<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& im = *impl_;
  const size_t bad = text::utf8_invalid_at(text);
  if (bad != text.size())
    return make_error("tokenizer: input is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), im.prefix_ids.begin(), im.prefix_ids.end());

  std::vector<text::AddedSplit> raw_splits, norm_splits;
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  if (im.raw_matcher.empty()) {
    if (!text.empty()) raw_splits.push_back({0, text.size(), -1});
  } else {
    im.raw_matcher.split(text, raw_splits);
  }
  for (const auto& rs : raw_splits) {
    // Keep memory flat on long inputs: earlier arena strings are no longer referenced.
    if (arena.size() > 64) arena.clear();
    if (rs.id >= 0) {
      ids.push_back(rs.id);
      continue;
    }
    std::string_view seg = text.substr(rs.b, rs.e - rs.b);
    if (!im.normalizer.empty()) {
      arena.push_back(im.normalizer.normalize(seg));
      seg = arena.back();
    }
    if (im.normalized_matcher.empty()) {
      TF_TRY(encode_segment(im, seg, pieces, arena, ids));
      continue;
    }
    norm_splits.clear();
    im.normalized_matcher.split(seg, norm_splits);
    for (const auto& ns : norm_splits) {
      if (ns.id >= 0) {
        ids.push_back(ns.id);
      } else {
        TF_TRY(encode_segment(im, seg.substr(ns.b, ns.e - ns.b), pieces, arena, ids));
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return ids;
}

bool Tokenizer::append_token_bytes(int32_t id, bool skip_special_tokens, bool first, std::string& out) const {
  const Impl& im = *impl_;
  const std::string* tok = nullptr;
  auto ai = im.added_by_id.find(id);
  if (ai != im.added_by_id.end()) {
    const AddedToken& at = im.added[ai->second];
    if (skip_special_tokens && at.special) return false;
    tok = &at.content;
  } else {
    tok = im.model.id_to_token(id);
    if (tok == nullptr) return false;
  }
  if (im.decoder == Impl::Decoder::None) {
    if (!first) out += ' ';
    out += *tok;
    return true;
  }
  // ByteLevel: map each alphabet char back to its byte; a token holding any other char is kept as its UTF-8.
  const size_t mark = out.size();
  size_t i = 0;
  while (i < tok->size()) {
    const int b = text::unicode_to_byte(text::utf8_next(*tok, i));
    if (b < 0) {
      out.resize(mark);
      out += *tok;
      return true;
    }
    out.push_back(static_cast<char>(b));
  }
  return true;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (int32_t id : ids)
    if (append_token_bytes(id, skip_special_tokens, first, bytes)) first = false;
  return text::utf8_lossy(bytes);
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(token);
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  auto ai = impl_->added_by_id.find(id);
  if (ai != impl_->added_by_id.end()) return impl_->added[ai->second].content;
  const std::string* t = impl_->model.id_to_token(id);
  if (t == nullptr) return std::nullopt;
  return *t;
}

bool Tokenizer::is_special(int32_t id) const {
  auto ai = impl_->added_by_id.find(id);
  return ai != impl_->added_by_id.end() && impl_->added[ai->second].special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad; }
std::optional<int32_t> Tokenizer::unk_token_id() const { return impl_->unk; }

}  // namespace tf
