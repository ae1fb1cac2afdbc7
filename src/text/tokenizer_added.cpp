#include "text/tokenizer_added.h"

#include <utf8proc.h>

#include <algorithm>

#include "text/unicode.h"

namespace tf::text {

namespace {

bool is_space(uint32_t cp) { return in_ranges(hf_class_ranges('s'), cp); }

// Rust regex's Unicode \w (Alphabetic, M, Nd, Pc, Join_Control), approximated with general categories.
bool is_word(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

uint32_t last_cp(std::string_view s, size_t end, size_t* start) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  size_t i = b;
  *start = b;
  return utf8_next(s, i);
}

}  // namespace

void AddedMatcher::build(std::vector<Pattern> patterns) {
  patterns_ = std::move(patterns);
  nodes_.assign(1, Node{});
  edges_.clear();
  for (bool& f : first_byte_) f = false;
  for (size_t p = 0; p < patterns_.size(); ++p) {
    const std::string& t = patterns_[p].text;
    if (t.empty()) continue;
    first_byte_[static_cast<unsigned char>(t[0])] = true;
    int32_t node = 0;
    for (char c : t) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(c);
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        nodes_.push_back(Node{});
        it = edges_.emplace(key, static_cast<int32_t>(nodes_.size() - 1)).first;
      }
      node = it->second;
    }
    // Two added tokens with the same content: the first one listed wins, as in the automaton.
    if (nodes_[static_cast<size_t>(node)].pattern < 0)
      nodes_[static_cast<size_t>(node)].pattern = static_cast<int32_t>(p);
  }
}

void AddedMatcher::split(std::string_view s, std::vector<AddedSplit>& out) const {
  if (s.empty()) return;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    if (!first_byte_[static_cast<unsigned char>(s[pos])]) {
      ++pos;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = pos; k < s.size(); ++k) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(s[k]));
      if (it == edges_.end()) break;
      node = it->second;
      if (nodes_[static_cast<size_t>(node)].pattern >= 0) {
        best = nodes_[static_cast<size_t>(node)].pattern;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const Pattern& pat = patterns_[static_cast<size_t>(best)];
    size_t start = pos, stop = best_end;
    pos = best_end;  // the automaton resumes after the match even when the filters below discard it
    if (pat.single_word) {
      size_t cs = 0;
      const bool start_space = start == 0 || !is_word(last_cp(s, start, &cs));
      size_t i = stop;
      const bool stop_space = stop == s.size() || !is_word(utf8_next(s, i));
      if (!start_space || !stop_space) continue;
    }
    if (pat.lstrip) {
      size_t newstart = start;
      while (newstart > 0) {
        size_t cs = 0;
        if (!is_space(last_cp(s, newstart, &cs))) break;
        newstart = cs;
      }
      start = std::max(newstart, start_offset);
    }
    if (pat.rstrip) {
      while (stop < s.size()) {
        size_t i = stop;
        if (!is_space(utf8_next(s, i))) break;
        stop = i;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, pat.id});
    start_offset = stop;
  }
  if (start_offset != s.size()) out.push_back({start_offset, s.size(), -1});
}

}  // namespace tf::text
