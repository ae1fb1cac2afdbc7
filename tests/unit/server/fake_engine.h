// A deterministic stand-in for the engine, for the server's tests only (never shipped). Token ids
// are the bytes of the text; every request answers with kReply one byte per token, so a split
// UTF-8 character (the 'é') arrives as a token with empty text followed by one that completes it.
#pragma once
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine_api.h"

namespace tf::testing {

inline const std::string kReply = "Caf\xc3\xa9 au lait, s'il vous pla\xc3\xaet.";

class FakeEngine : public EngineApi {
 public:
  std::atomic<bool> is_ready{true};
  bool vision = true;
  int64_t context = 4096;
  std::chrono::milliseconds prefill_delay{0};  // before Started, checking cancellation
  std::chrono::milliseconds token_delay{0};
  std::string reply = kReply;
  // false: keep no per-request history and detach request threads, so a long load run against
  // the fake measures only the server's own memory.
  bool keep_history = true;

  ~FakeEngine() override {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
    while (live_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  EngineInfo info() const override { return EngineInfo{"fake-model", "fake", context, vision, 1700000000}; }
  bool ready() const override { return is_ready; }

  std::shared_ptr<RequestChannel> submit(GenerationRequest request) override {
    auto ch = std::make_shared<RequestChannel>();
    if (!keep_history) {
      ++live_;
      std::thread([this, ch, r = std::move(request)] {
        run(r, *ch);
        --live_;
      }).detach();
      return ch;
    }
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.push_back(request);
    threads_.emplace_back([this, ch, r = std::move(request)] { run(r, *ch); });
    return ch;
  }

  Expected<std::vector<int32_t>> tokenize(const GenerationRequest& r) override {
    if (r.prompt_ids) return *r.prompt_ids;
    std::string text = r.prompt_text ? *r.prompt_text : render(*r.messages);
    return std::vector<int32_t>(text.begin(), text.end());
  }

  Expected<std::string> detokenize(const std::vector<int32_t>& ids) override {
    std::string s;
    for (int32_t id : ids) {
      if (id > 255) return make_error("token id " + std::to_string(id) + " is outside the vocabulary (256)");
      s += static_cast<char>(id);
    }
    return s;
  }

  std::string metrics_text() const override { return "tensorfold_fake_engine_up 1\n"; }

  std::vector<GenerationRequest> submitted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  int cancels_seen() const { return cancels_.load(); }
  int finished() const { return finished_.load(); }

  static std::string render(const ordered_json& messages) {
    std::string s;
    for (const auto& m : messages) {
      s += m["role"].get<std::string>() + ":";
      if (m.contains("content") && m["content"].is_string())
        s += m["content"].get<std::string>();
      else if (m.contains("content") && m["content"].is_array())
        for (const auto& p : m["content"]) s += p["type"] == "text" ? p["text"].get<std::string>() : "<img>";
      s += "\n";
    }
    return s;
  }

 private:
  static bool sniff_ok(const std::vector<uint8_t>& b) {
    auto starts = [&](const char* magic, size_t n, size_t at = 0) {
      return b.size() >= at + n &&
             std::equal(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n),
                        reinterpret_cast<const unsigned char*>(magic));
    };
    return starts("\x89PNG", 4) || starts("\xff\xd8\xff", 3) || (starts("RIFF", 4) && starts("WEBP", 4, 8));
  }

  void run(const GenerationRequest& r, RequestChannel& ch) {
    auto fail = [&](int status, std::string msg, std::string code) {
      EngineEvent e;
      e.kind = EngineEvent::Kind::Error;
      e.http_status = status;
      e.message = std::move(msg);
      e.type = "invalid_request_error";
      e.code = std::move(code);
      ch.push(std::move(e));
    };
    for (size_t i = 0; i < r.images.size(); ++i) {
      std::string n = std::to_string(i + 1);
      if (!sniff_ok(r.images[i]))
        return fail(400, "image " + n + " is not PNG, JPEG or WebP; send one of those", "");
      if (r.images[i].size() < 16)
        return fail(400, "image " + n + " could not be decoded; send PNG, JPEG or WebP", "");
    }
    std::vector<int32_t> prompt = *tokenize(r);
    int64_t max_tokens = r.max_tokens ? r.max_tokens : 64;
    if (static_cast<int64_t>(prompt.size()) + max_tokens > context)
      return fail(400,
                  "prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" +
                      std::to_string(max_tokens) + ") exceeds the context length (" +
                      std::to_string(context) + ")",
                  "context_length_exceeded");
    auto cancelled = [&] {
      if (!r.cancelled->load()) return false;
      ++cancels_;
      EngineEvent e;
      e.kind = EngineEvent::Kind::Finished;
      e.finish_reason = "client-left";
      ch.push(std::move(e));
      return true;
    };
    for (auto waited = std::chrono::milliseconds(0); waited < prefill_delay;
         waited += std::chrono::milliseconds(5)) {
      if (cancelled()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EngineEvent started;
    started.kind = EngineEvent::Kind::Started;
    started.prompt_ids = prompt;
    ch.push(std::move(started));
    int64_t n = 0;
    std::string pending;
    for (unsigned char c : reply) {
      if (n == max_tokens) break;
      if (cancelled()) return;
      if (token_delay.count()) std::this_thread::sleep_for(token_delay);
      EngineEvent t;
      t.kind = EngineEvent::Kind::Token;
      t.token = c;
      pending += static_cast<char>(c);
      // Emit text only once it ends on a complete UTF-8 character, like the real detokenizer.
      if ((c & 0xC0) != 0xC0 && (c < 0x80 || pending.size() >= 2)) t.text.swap(pending);
      if (r.logprobs) {
        t.logprob = TokenLogprob{c, -0.25f};
        for (int k = 0; k < r.top_logprobs; ++k) t.top_logprobs.push_back(TokenLogprob{c + k, -0.25f - k});
      }
      ch.push(std::move(t));
      ++n;
    }
    EngineEvent fin;
    fin.kind = EngineEvent::Kind::Finished;
    fin.finish_reason = n == max_tokens && n < static_cast<int64_t>(reply.size()) ? "length" : "stop";
    fin.usage.prompt_tokens = static_cast<int64_t>(prompt.size());
    fin.usage.completion_tokens = n;
    fin.usage.cached_tokens = 2;
    ++finished_;
    ch.push(std::move(fin));
  }

  mutable std::mutex mu_;
  std::vector<GenerationRequest> submitted_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancels_{0}, finished_{0}, live_{0};
};

}  // namespace tf::testing
