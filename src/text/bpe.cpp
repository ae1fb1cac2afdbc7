#include "text/bpe.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "text/unicode.h"

namespace tf::text {

BpeModel::BpeModel(BpeModel&& o) noexcept { *this = std::move(o); }

BpeModel& BpeModel::operator=(BpeModel&& o) noexcept {
  vocab_ = std::move(o.vocab_);
  id_to_token_ = std::move(o.id_to_token_);
  has_id_ = std::move(o.has_id_);
  merges_ = std::move(o.merges_);
  byte_ids_ = o.byte_ids_;
  unk_id_ = o.unk_id_;
  fuse_unk_ = o.fuse_unk_;
  byte_fallback_ = o.byte_fallback_;
  ignore_merges_ = o.ignore_merges_;
  prefix_ = std::move(o.prefix_);
  suffix_ = std::move(o.suffix_);
  cache_.clear();
  return *this;
}

namespace {
Expected<std::string> optional_string(const nlohmann::json& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) return std::string();
  if (!m[key].is_string())
    return make_error(std::string("tokenizer.json: model.") + key + " must be a string or null");
  return m[key].get<std::string>();
}
bool optional_bool(const nlohmann::json& m, const char* key) {
  return m.contains(key) && m[key].is_boolean() && m[key].get<bool>();
}
}  // namespace

Expected<BpeModel> BpeModel::from_json(const nlohmann::json& m) {
  BpeModel b;
  if (!m.contains("vocab") || !m["vocab"].is_object())
    return make_error("tokenizer.json: model has no \"vocab\" object");
  if (!m.contains("merges") || !m["merges"].is_array())
    return make_error("tokenizer.json: BPE model has no \"merges\" array");
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0.0)
    return make_error("tokenizer.json: BPE dropout is not supported");
  const auto& vocab = m["vocab"];
  b.vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  // Ids index a dense table: refuse ids far beyond the number of entries (a sparse id would otherwise make
  // the load allocate gigabytes; the fuzzer found one).
  const int64_t id_limit = 16 * static_cast<int64_t>(vocab.size()) + 65536;
  for (const auto& [tok, idj] : vocab.items()) {
    if (!idj.is_number_integer() || idj.get<int64_t>() < 0 || idj.get<int64_t>() >= id_limit)
      return make_error("tokenizer.json: vocab entry '" + tok + "' has an invalid id");
    const auto id = static_cast<int32_t>(idj.get<int64_t>());
    b.vocab_.emplace(tok, id);
    max_id = std::max(max_id, id);
  }
  b.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  b.has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : b.vocab_) {
    b.id_to_token_[static_cast<size_t>(id)] = tok;
    b.has_id_[static_cast<size_t>(id)] = true;
  }
  TF_ASSIGN(b.prefix_, optional_string(m, "continuing_subword_prefix"));
  TF_ASSIGN(b.suffix_, optional_string(m, "end_of_word_suffix"));
  std::string unk;
  TF_ASSIGN(unk, optional_string(m, "unk_token"));
  if (!unk.empty()) {
    auto it = b.vocab_.find(unk);
    if (it == b.vocab_.end())
      return make_error("tokenizer.json: unk_token '" + unk + "' is not in the vocab");
    b.unk_id_ = it->second;
  }
  b.fuse_unk_ = optional_bool(m, "fuse_unk");
  b.byte_fallback_ = optional_bool(m, "byte_fallback");
  b.ignore_merges_ = optional_bool(m, "ignore_merges");

  const auto& merges = m["merges"];
  b.merges_.reserve(merges.size() * 2);
  const size_t prefix_len = b.prefix_.size();
  int32_t rank = 0;
  for (const auto& mj : merges) {
    std::string left, right;
    if (mj.is_string()) {
      const std::string s = mj.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return make_error("tokenizer.json: merge '" + s + "' is not two tokens separated by one space");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
      left = mj[0].get<std::string>();
      right = mj[1].get<std::string>();
    } else {
      return make_error("tokenizer.json: merge #" + std::to_string(rank) +
                        " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto li = b.vocab_.find(left), ri = b.vocab_.find(right);
    if (li == b.vocab_.end())
      return make_error("tokenizer.json: merge token '" + left + "' is not in the vocab");
    if (ri == b.vocab_.end())
      return make_error("tokenizer.json: merge token '" + right + "' is not in the vocab");
    const std::string merged = left + (right.size() >= prefix_len ? right.substr(prefix_len) : std::string());
    auto ni = b.vocab_.find(merged);
    if (ni == b.vocab_.end())
      return make_error("tokenizer.json: merged token '" + merged + "' is not in the vocab");
    const uint64_t key = (static_cast<uint64_t>(li->second) << 32) | static_cast<uint32_t>(ri->second);
    b.merges_.insert_or_assign(key, MergeTarget{rank, ni->second});  // a later duplicate wins, as in HF
    ++rank;
  }
  for (int byte = 0; byte < 256; ++byte) {
    std::string ch;
    utf8_append(ch, byte_to_unicode(static_cast<uint8_t>(byte)));
    auto it = b.vocab_.find(ch);
    b.byte_ids_[static_cast<size_t>(byte)] = it == b.vocab_.end() ? -1 : it->second;
  }
  return b;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<size_t>(id)])
    return nullptr;
  return &id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  // HF's BPE::merge_word: an unknown character leaves a pending unk that is written only when the next
  // in-vocab character (or the end) comes; byte-fallback pieces are written at once and do not flush it,
  // and with fuse_unk consecutive unknowns share one pending unk.
  size_t i = 0;
  bool pending_unk = false;
  std::string s;
  std::vector<int32_t> bytes;
  while (i < word.size()) {
    const size_t start = i;
    utf8_next(word, i);
    s.clear();
    if (start > 0 && !prefix_.empty()) s += prefix_;
    s.append(word.substr(start, i - start));
    if (i == word.size() && !suffix_.empty()) s += suffix_;
    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      if (pending_unk) syms.push_back(*unk_id_);
      pending_unk = false;
      syms.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bytes.clear();
      bool all = true;
      for (size_t k = start; k < i; ++k) {
        char code[8];
        std::snprintf(code, sizeof code, "<0x%02X>", static_cast<unsigned char>(word[k]));
        auto bi = vocab_.find(std::string_view(code));
        if (bi == vocab_.end()) {
          all = false;
          break;
        }
        bytes.push_back(bi->second);
      }
      if (all) {
        syms.insert(syms.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) syms.push_back(*unk_id_);
      pending_unk = true;
    }
    // Without an unk token HF drops the character.
  }
  if (pending_unk) syms.push_back(*unk_id_);
}

void BpeModel::merge(std::vector<int32_t>& ids) const {
  const size_t n = ids.size();
  if (n < 2) return;
  struct Cand {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<bool> alive;
  thread_local std::vector<Cand> heap;
  prev.resize(n);
  next.resize(n);
  alive.assign(n, true);
  heap.clear();
  auto lookup = [&](int32_t a, int32_t b) -> const MergeTarget* {
    auto it = merges_.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t k = 0; k < n; ++k) {
    prev[k] = static_cast<int32_t>(k) - 1;
    next[k] = k + 1 < n ? static_cast<int32_t>(k + 1) : -1;
    if (k + 1 < n)
      if (const auto* t = lookup(ids[k], ids[k + 1]))
        heap.push_back({t->rank, static_cast<int32_t>(k), t->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Cand top = heap.back();
    heap.pop_back();
    const auto p = static_cast<size_t>(top.pos);
    if (!alive[p] || next[p] < 0) continue;
    const auto r = static_cast<size_t>(next[p]);
    const auto* t = lookup(ids[p], ids[r]);
    if (t == nullptr || t->new_id != top.new_id) continue;  // stale entry: a neighbour changed
    ids[p] = top.new_id;
    alive[r] = false;
    next[p] = next[r];
    if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = top.pos;
    if (prev[p] >= 0) {
      const auto l = static_cast<size_t>(prev[p]);
      if (const auto* tl = lookup(ids[l], ids[p])) {
        heap.push_back({tl->rank, prev[p], tl->new_id});
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    }
    if (next[p] >= 0) {
      if (const auto* tr = lookup(ids[p], ids[static_cast<size_t>(next[p])])) {
        heap.push_back({tr->rank, top.pos, tr->new_id});
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    }
  }
  size_t w = 0;
  for (int32_t k = 0; k >= 0; k = next[static_cast<size_t>(k)]) ids[w++] = ids[static_cast<size_t>(k)];
  ids.resize(w);
}

void BpeModel::encode_uncached(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const {
  std::string mapped;
  std::string_view word = piece;
  const bool fast_bytes = byte_level && prefix_.empty() && suffix_.empty() && !byte_fallback_;
  if (byte_level && (!fast_bytes || ignore_merges_)) {
    mapped = byte_level_encode(piece);
    word = mapped;
  }
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> syms;
  syms.reserve(word.size());
  if (fast_bytes) {
    bool pending_unk = false;  // as in initial_symbols()
    for (char c : piece) {
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id >= 0) {
        if (pending_unk) syms.push_back(*unk_id_);
        pending_unk = false;
        syms.push_back(id);
      } else if (unk_id_) {
        if (pending_unk && !fuse_unk_) syms.push_back(*unk_id_);
        pending_unk = true;
      }
    }
    if (pending_unk) syms.push_back(*unk_id_);
  } else {
    initial_symbols(word, syms);
  }
  merge(syms);
  out.insert(out.end(), syms.begin(), syms.end());
}

void BpeModel::encode_word(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const {
  const bool cacheable = piece.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t before = out.size();
  encode_uncached(piece, byte_level, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() < kCacheCapacity)
      cache_.emplace(std::string(piece),
                     std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(before), out.end()));
  }
}

}  // namespace tf::text
