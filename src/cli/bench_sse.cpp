#include "cli/bench_sse.h"

#include <nlohmann/json.hpp>

namespace tf::cli::bench {

using json = nlohmann::json;

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> out;
  for (char c : bytes) {
    if (c == '\n' && after_cr_) {  // the \n of a \r\n whose \r ended the line already
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r')
      end_line(out);
    else
      line_ += c;
  }
  return out;
}

void SseParser::end_line(std::vector<std::string>& out) {
  if (line_.empty()) {  // a blank line dispatches the event (one without data is dropped)
    if (has_data_) out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view l = line_;
  size_t colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (colon != 0 && field == "data") {  // colon == 0: a comment
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  }
  line_.clear();
}

std::optional<std::string> SseParser::flush() {
  std::vector<std::string> out;
  if (!line_.empty()) end_line(out);
  if (!has_data_) return std::nullopt;
  has_data_ = false;
  return std::move(data_);
}

std::string one_line(std::string_view s, size_t max_bytes) {
  std::string out;
  bool cut = s.size() > max_bytes;
  if (cut) {
    size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
    s = s.substr(0, n);
  }
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (cut) out += "...";
  return out;
}

namespace {

// The message an error body carries (OpenAI's, FastAPI's or a bare one), else the body itself; one line.
std::string body_message(std::string_view body) {
  std::string msg;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    const json* e = nullptr;
    if (j.contains("error")) e = &j["error"];
    if (e && e->is_object() && e->contains("message")) e = &(*e)["message"];
    if (!e && j.contains("detail")) e = &j["detail"];  // FastAPI's shape
    if (!e && j.contains("message")) e = &j["message"];
    if (e) msg = e->is_string() ? e->get<std::string>() : e->dump();
  }
  return one_line(msg.empty() ? body : std::string_view(msg));
}

}  // namespace

std::string http_error_message(int status, std::string_view body) {
  std::string msg = body_message(body);
  return "HTTP " + std::to_string(status) + (msg.empty() ? "" : ": " + msg);
}

StreamReader::StreamReader(double start_s) {
  r_.started = true;
  r_.start_s = start_s;
}

void StreamReader::on_status(int status) { r_.http_status = status; }

void StreamReader::on_bytes(std::string_view bytes, double now_s) {
  if (r_.http_status != 200) {
    constexpr size_t kKeep = 64 * 1024;
    if (body_.size() < kKeep) body_.append(bytes.substr(0, kKeep - body_.size()));
    return;
  }
  for (const std::string& data : sse_.feed(bytes)) on_event(data, now_s);
}

namespace {

// Output tokens a choice carries: its token_ids when present, else 1 for non-empty text.
int64_t choice_tokens(const json& choice) {
  if (auto it = choice.find("token_ids"); it != choice.end() && it->is_array()) return int64_t(it->size());
  auto nonempty = [](const json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (nonempty(choice, "text")) return 1;
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object())
    if (nonempty(*d, "content") || nonempty(*d, "reasoning_content") || nonempty(*d, "reasoning")) return 1;
  return 0;
}

}  // namespace

void StreamReader::on_event(const std::string& data, double now_s) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    if (r_.error.empty()) r_.error = "malformed stream event: " + one_line(data, 120);
    return;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    if (r_.error.empty()) r_.error = "error event in the stream: " + body_message(data);
    return;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_integer())
      r_.usage_tokens = c->get<int64_t>();
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return;
  const json& choice = (*choices)[0];
  if (int64_t n = choice_tokens(choice); n > 0) {
    double t = now_s - r_.start_s;
    if (r_.ttft_s < 0)
      r_.ttft_s = t;
    else
      r_.itl_s.push_back(t - last_output_s_);
    last_output_s_ = t;
    r_.chunk_tokens += n;
  }
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) r_.finish_reason = *f;
}

RequestRecord StreamReader::finish(double now_s, const std::string& transport_error, bool aborted) {
  if (r_.http_status == 200)
    if (auto last = sse_.flush()) on_event(*last, now_s);
  r_.e2e_s = now_s - r_.start_s;
  r_.aborted = aborted;
  if (aborted) {
    // Cut on purpose: not an error, not done.
  } else if (r_.http_status != 200 && r_.http_status != 0) {
    r_.error = http_error_message(r_.http_status, body_);
  } else if (!transport_error.empty()) {
    if (r_.error.empty()) r_.error = transport_error;
  } else if (r_.error.empty() && !done_ && r_.finish_reason.empty()) {
    r_.error = "the stream ended without a finish_reason or [DONE]";
  }
  r_.ok = !aborted && r_.error.empty();
  return std::move(r_);
}

}  // namespace tf::cli::bench
