#include "text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "text/unicode.h"

namespace tf::text {

Status Normalizer::add(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return make_error("tokenizer.json: normalizer without a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") {
    forms_.push_back(Form::NFC);
  } else if (type == "NFD") {
    forms_.push_back(Form::NFD);
  } else if (type == "NFKC") {
    forms_.push_back(Form::NFKC);
  } else if (type == "NFKD") {
    forms_.push_back(Form::NFKD);
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return make_error("tokenizer.json: normalizer Sequence without a \"normalizers\" array");
    for (const auto& sub : j["normalizers"]) TF_TRY(add(sub));
  } else {
    return make_error("tokenizer.json: normalizer type '" + type + "' is not supported");
  }
  return {};
}

Expected<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
  Normalizer n;
  if (j.is_null()) return n;
  TF_TRY(n.add(j));
  return n;
}

namespace {
std::string apply_forms(const std::vector<Normalizer::Form>& forms, std::string_view s) {
  std::string cur(s);
  for (Normalizer::Form f : forms) {
    int opts = UTF8PROC_STABLE;
    switch (f) {
      case Normalizer::Form::NFC:
        opts |= UTF8PROC_COMPOSE;
        break;
      case Normalizer::Form::NFD:
        opts |= UTF8PROC_DECOMPOSE;
        break;
      case Normalizer::Form::NFKC:
        opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Normalizer::Form::NFKD:
        opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                     static_cast<utf8proc_ssize_t>(cur.size()), &out, static_cast<utf8proc_option_t>(opts));
    // The input was validated before; utf8proc only fails on invalid UTF-8 or out of memory.
    if (n < 0 || out == nullptr) continue;
    cur.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }
  return cur;
}
}  // namespace

std::string Normalizer::normalize(std::string_view s) const {
  // Every form leaves pure ASCII unchanged, which is most input; skip the copy through utf8proc.
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii || forms_.empty()) return std::string(s);
  // HF's tables are Unicode 9.0: characters assigned later are inert starters there (no reordering, no
  // (de)composition). Normalizing the runs between them and copying them verbatim reproduces that, because a
  // starter blocks reordering and composition across it.
  const auto post9 = post_unicode9_normalization_ranges();
  const uint32_t min_cp = post9.empty() ? 0x110000 : post9.front().lo;
  std::string out;
  size_t run = 0, i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const uint32_t cp = utf8_next(s, i);
    if (cp >= min_cp && in_ranges(post9, cp)) {
      out += apply_forms(forms_, s.substr(run, start - run));
      out.append(s.substr(start, i - start));
      run = i;
    }
  }
  if (run == 0) return apply_forms(forms_, s);
  out += apply_forms(forms_, s.substr(run));
  return out;
}

}  // namespace tf::text
