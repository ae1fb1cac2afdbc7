// Parsing tokenizer.json / tokenizer_config.json into Tokenizer::Impl; every unsupported component is
// refused.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"

namespace tf {

namespace {

using nlohmann::json;

Expected<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return make_error("cannot read " + path);
  return ss.str();
}

bool flag(const json& j, const char* key, bool dflt) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : dflt;
}

Status parse_added_tokens(const json& root, Tokenizer::Impl& im) {
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return {};
  if (!root["added_tokens"].is_array())
    return make_error("tokenizer.json: \"added_tokens\" must be an array");
  int32_t max_added = -1;
  for (const auto& t : root["added_tokens"]) {
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id") ||
        !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() > (1 << 30))
      return make_error("tokenizer.json: added token without a valid \"id\" and \"content\"");
    AddedToken a;
    a.content = t["content"].get<std::string>();
    a.special = flag(t, "special", false);
    a.lstrip = flag(t, "lstrip", false);
    a.rstrip = flag(t, "rstrip", false);
    a.single_word = flag(t, "single_word", false);
    a.normalized = flag(t, "normalized", !a.special);
    if (a.content.empty()) continue;  // HF ignores empty added tokens
    if (im.added_by_content.count(a.content)) continue;
    // HF (AddedVocabulary::add_tokens) does not trust the listed id: a token already in the model vocab keeps
    // its model id, a new one gets the next id after the model vocab / the largest added id.
    if (auto mid = im.model.token_to_id(a.content)) {
      a.id = *mid;
    } else {
      const auto n_model = static_cast<int32_t>(im.model.n_vocab());
      a.id = max_added < 0 ? n_model : (max_added >= n_model || n_model == 0 ? max_added + 1 : n_model);
    }
    max_added = std::max(max_added, a.id);
    im.added_by_id[a.id] = im.added.size();
    im.added_by_content.emplace(a.content, a.id);
    im.added.push_back(std::move(a));
  }
  // HF builds its automata from the special tokens first, then the others, each in the order given.
  std::vector<text::AddedMatcher::Pattern> raw, norm;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& a : im.added) {
      if (a.special != (pass == 0)) continue;
      text::AddedMatcher::Pattern p{a.content, a.id, a.lstrip, a.rstrip, a.single_word};
      if (a.normalized) {
        p.text = im.normalizer.normalize(a.content);
        norm.push_back(std::move(p));
      } else {
        raw.push_back(std::move(p));
      }
    }
  }
  im.raw_matcher.build(std::move(raw));
  im.normalized_matcher.build(std::move(norm));
  return {};
}

// Resolves a post-processor special-token entry to ids.
Expected<std::vector<int32_t>> pair_ids(const json& j, const char* what) {
  // BertProcessing/RobertaProcessing store ["[CLS]", 101].
  if (!j.is_array() || j.size() != 2 || !j[1].is_number_integer())
    return make_error(std::string("tokenizer.json: post_processor \"") + what + "\" must be [token, id]");
  return std::vector<int32_t>{static_cast<int32_t>(j[1].get<int64_t>())};
}

Status parse_template(const json& pp, Tokenizer::Impl& im) {
  if (!pp.contains("single") || !pp["single"].is_array())
    return make_error("tokenizer.json: TemplateProcessing without a \"single\" template");
  const json specials = pp.value("special_tokens", json::object());
  bool seen_sequence = false;
  for (const auto& piece : pp["single"]) {
    if (piece.is_object() && piece.contains("Sequence")) {
      if (seen_sequence) return make_error("tokenizer.json: TemplateProcessing \"single\" has two sequences");
      seen_sequence = true;
      continue;
    }
    if (!piece.is_object() || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object() ||
        !piece["SpecialToken"].contains("id") || !piece["SpecialToken"]["id"].is_string())
      return make_error("tokenizer.json: TemplateProcessing piece is neither Sequence nor SpecialToken");
    const std::string name = piece["SpecialToken"]["id"].get<std::string>();
    if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      return make_error("tokenizer.json: TemplateProcessing special token '" + name + "' has no ids");
    auto& dst = seen_sequence ? im.suffix_ids : im.prefix_ids;
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer())
        return make_error("tokenizer.json: TemplateProcessing id is not an integer");
      dst.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (!seen_sequence) return make_error("tokenizer.json: TemplateProcessing \"single\" has no Sequence");
  return {};
}

Status parse_post_processor(const json& pp, Tokenizer::Impl& im) {
  if (pp.is_null()) return {};
  if (!pp.is_object() || !pp.contains("type") || !pp["type"].is_string())
    return make_error("tokenizer.json: post_processor without a \"type\"");
  const std::string type = pp["type"].get<std::string>();
  if (type == "ByteLevel") return {};  // only trims offsets, which tensorfold does not produce
  if (type == "TemplateProcessing") return parse_template(pp, im);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    std::vector<int32_t> cls, sep;
    TF_ASSIGN(cls, pair_ids(pp.value("cls", json()), "cls"));
    TF_ASSIGN(sep, pair_ids(pp.value("sep", json()), "sep"));
    im.prefix_ids.insert(im.prefix_ids.end(), cls.begin(), cls.end());
    im.suffix_ids.insert(im.suffix_ids.begin(), sep.begin(), sep.end());
    return {};
  }
  if (type == "Sequence") {
    if (!pp.contains("processors") || !pp["processors"].is_array())
      return make_error("tokenizer.json: post_processor Sequence without a \"processors\" array");
    for (const auto& sub : pp["processors"]) TF_TRY(parse_post_processor(sub, im));
    return {};
  }
  return make_error("tokenizer.json: post_processor type '" + type + "' is not supported");
}

Status parse_decoder(const json& d, Tokenizer::Impl& im) {
  if (d.is_null()) {
    im.decoder = Tokenizer::Impl::Decoder::None;
    return {};
  }
  if (!d.is_object() || !d.contains("type") || !d["type"].is_string())
    return make_error("tokenizer.json: decoder without a \"type\"");
  const std::string type = d["type"].get<std::string>();
  if (type == "ByteLevel") {
    im.decoder = Tokenizer::Impl::Decoder::ByteLevel;
    return {};
  }
  return make_error("tokenizer.json: decoder type '" + type + "' is not supported");
}

std::optional<int32_t> special_from_config(const json& cfg, const char* key, const Tokenizer& tok) {
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  std::string name;
  if (v.is_string())
    name = v.get<std::string>();
  else if (v.is_object() && v.contains("content") && v["content"].is_string())
    name = v["content"].get<std::string>();
  else
    return std::nullopt;
  return tok.token_to_id(name);
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_json_text(std::string_view tokenizer_json,
                                              std::string_view tokenizer_config) {
  json root = json::parse(tokenizer_json.begin(), tokenizer_json.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return make_error("tokenizer.json: not valid JSON");
  if (!root.is_object()) return make_error("tokenizer.json: top level is not an object");
  auto im = std::make_unique<Impl>();

  if (!root.contains("model") || !root["model"].is_object())
    return make_error("tokenizer.json: no \"model\" object");
  const json& model = root["model"];
  std::string mtype = "BPE";  // old files omit the type; HF then infers it from the fields, BPE having merges
  if (model.contains("type")) {
    if (!model["type"].is_string()) return make_error("tokenizer.json: model \"type\" is not a string");
    mtype = model["type"].get<std::string>();
  } else if (!model.contains("merges")) {
    return make_error("tokenizer.json: model has no \"type\"");
  }
  if (mtype != "BPE") return make_error("tokenizer.json: model type '" + mtype + "' is not supported");
  TF_ASSIGN(im->model, text::BpeModel::from_json(model));
  TF_ASSIGN(im->normalizer, text::Normalizer::from_json(root.value("normalizer", json())));
  TF_ASSIGN(im->pre_tokenizer, text::PreTokenizer::from_json(root.value("pre_tokenizer", json())));
  TF_TRY(parse_added_tokens(root, *im));
  TF_TRY(parse_post_processor(root.value("post_processor", json()), *im));
  TF_TRY(parse_decoder(root.value("decoder", json()), *im));

  int32_t max_id = im->model.max_id();
  for (const auto& a : im->added) max_id = std::max(max_id, a.id);
  im->vocab_size = static_cast<size_t>(max_id + 1);
  for (int32_t id : im->prefix_ids)
    if (id < 0 || id > max_id)
      return make_error("tokenizer.json: post_processor id " + std::to_string(id) + " is not in the vocab");
  for (int32_t id : im->suffix_ids)
    if (id < 0 || id > max_id)
      return make_error("tokenizer.json: post_processor id " + std::to_string(id) + " is not in the vocab");

  Tokenizer tok(std::move(im));
  if (!tokenizer_config.empty()) {
    json cfg = json::parse(tokenizer_config.begin(), tokenizer_config.end(), nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object())
      return make_error("tokenizer_config.json: not a valid JSON object");
    tok.impl_->bos = special_from_config(cfg, "bos_token", tok);
    tok.impl_->eos = special_from_config(cfg, "eos_token", tok);
    tok.impl_->pad = special_from_config(cfg, "pad_token", tok);
    tok.impl_->unk = special_from_config(cfg, "unk_token", tok);
  }
  return tok;
}

Expected<Tokenizer> Tokenizer::load(const std::string& tokenizer_json_path,
                                    const std::string& tokenizer_config_path) {
  std::string text, cfg;
  TF_ASSIGN(text, read_file(tokenizer_json_path));
  if (!tokenizer_config_path.empty()) {
    TF_ASSIGN(cfg, read_file(tokenizer_config_path));
  }
  auto tok = from_json_text(text, cfg);
  if (!tok.ok()) return make_error(tok.error().message + " (" + tokenizer_json_path + ")");
  return tok;
}

}  // namespace tf
