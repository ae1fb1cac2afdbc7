#include "text/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

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

std::string Normalizer::normalize(std::string_view s) const {
  // Every form leaves pure ASCII unchanged, which is most input; skip the copy through utf8proc.
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  std::string cur(s);
  if (ascii) return cur;
  for (Form f : forms_) {
    int opts = UTF8PROC_STABLE;
    switch (f) {
      case Form::NFC: opts |= UTF8PROC_COMPOSE; break;
      case Form::NFD: opts |= UTF8PROC_DECOMPOSE; break;
      case Form::NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Form::NFKD: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(cur.data()),
                                            static_cast<utf8proc_ssize_t>(cur.size()), &out,
                                            static_cast<utf8proc_option_t>(opts));
    // The input was validated before; utf8proc only fails on invalid UTF-8 or out of memory.
    if (n < 0 || out == nullptr) continue;
    cur.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
  }
  return cur;
}

}  // namespace tf::text
