// The generation routes: submit to the engine, then turn its events into one JSON body or an SSE
// stream, noticing a client that leaves (the request is cancelled; the engine drops it in a step).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>

#include "base/log.h"
#include "server/client_conn.h"
#include "server/response_build.h"
#include "server/server_state.h"

namespace tf {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 50;

std::string new_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%016llx%08llx", prefix, static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

// One request in flight; shared by the handler and (for streams) the content provider.
struct Flight {
  ServerState* st = nullptr;
  std::shared_ptr<EngineApi> engine;
  std::shared_ptr<RequestChannel> channel;
  std::shared_ptr<std::atomic<bool>> cancelled;
  ResponseHeader header;
  int fd = -1;
  Clock::time_point t0 = Clock::now();
  std::vector<int32_t> prompt_ids, token_ids;
  std::string text;
  std::vector<LogprobText> logprobs;
  Usage usage;
  bool done = false;                // logged and counted
  std::optional<EngineEvent> held;  // an event read ahead while choosing the stream's status

  enum class Wait { Event, ClientLeft, Stopping };
  // Next engine event; between polls, checks that the client is still there.
  Wait next(EngineEvent* out, const std::function<bool()>& client_gone) {
    if (held) {
      *out = std::move(*held);
      held.reset();
      return Wait::Event;
    }
    for (;;) {
      // Checked before every event too: while tokens arrive faster than the poll interval a
      // timeout never comes, and a client that left or a shutdown would go unnoticed to the end.
      if (st->stopping) return Wait::Stopping;
      if (peer_closed(fd) || (client_gone && client_gone())) return Wait::ClientLeft;
      if (auto e = channel->pop(kPollMs)) {
        *out = std::move(*e);
        return Wait::Event;
      }
    }
  }

  // A Token event with id -1 carries only text the engine held back (a stop-string prefix or an
  // unfinished character) until the length limit; it is no token.
  void absorb_token(const EngineEvent& e) {
    if (e.token >= 0) token_ids.push_back(e.token);
    text += e.text;
    if (header.logprobs && e.logprob) logprobs.push_back(resolve_logprob(e));
  }

  LogprobText resolve_logprob(const EngineEvent& e) const {
    auto token_text = [&](int32_t id) {
      auto t = engine->detokenize({id});
      return t.ok() ? *t : std::string();
    };
    LogprobText lp;
    lp.token = token_text(e.logprob->id);
    lp.logprob = e.logprob->logprob;
    for (const TokenLogprob& t : e.top_logprobs) lp.top.emplace_back(token_text(t.id), t.logprob);
    return lp;
  }

  void finish_log(const std::string& reason) {
    if (done) return;
    done = true;
    st->metrics.count_finish(reason);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    int64_t prompt = usage.prompt_tokens ? usage.prompt_tokens : static_cast<int64_t>(prompt_ids.size());
    int64_t out = usage.completion_tokens ? usage.completion_tokens : static_cast<int64_t>(token_ids.size());
    char buf[256];
    std::snprintf(buf, sizeof(buf), "request %s reason=%s prompt=%lld tokens=%lld cached=%lld after=%.2fs",
                  header.id.c_str(), reason.c_str(), static_cast<long long>(prompt),
                  static_cast<long long>(out), static_cast<long long>(usage.cached_tokens), secs);
    log_debug(buf);  // the engine logs every request at info level
  }

  // The client left (or the server is stopping): the engine sees the flag and drops the request
  // within one step, freeing its memory and logging its line; nothing more is read here.
  void abandon(const std::string& reason) {
    cancelled->store(true);
    finish_log(reason);
  }
};

ApiError engine_error(const EngineEvent& e) {
  ApiError err{e.http_status ? e.http_status : 500, e.message, e.param, e.code, e.type, e.retry_after_s};
  if (err.message.empty()) err.message = "the engine failed this request";
  return err;
}

ApiError stopping_error() { return ApiError{503, "the server is shutting down", "", "", ""}; }

void run_non_stream(Flight& f, httplib::Response& res) {
  EngineEvent e;
  for (;;) {
    Flight::Wait w = f.next(&e, nullptr);
    if (w == Flight::Wait::ClientLeft) return f.abandon("client-left");
    if (w == Flight::Wait::Stopping) {
      f.abandon("shutdown");
      return send_error(res, stopping_error());
    }
    switch (e.kind) {
      case EngineEvent::Kind::Started:
        f.prompt_ids = e.prompt_ids;
        break;
      case EngineEvent::Kind::Token:
        f.absorb_token(e);
        break;
      case EngineEvent::Kind::Error:
        f.finish_log("error");
        return send_error(res, engine_error(e));
      case EngineEvent::Kind::Finished: {
        f.usage = e.usage;
        CompletionResult r{f.text, e.finish_reason, f.usage, f.prompt_ids, f.token_ids, f.logprobs};
        f.finish_log(e.finish_reason);
        return send_json(res, 200, completion_json(f.header, r));
      }
    }
  }
}

// Writes the whole stream from inside httplib's content provider (one call, many chunks).
// Returns false when the stream ended without sink.done() (the client left): httplib then stops.
bool run_stream(Flight& f, httplib::DataSink& sink) {
  StreamFormatter fmt(f.header);
  auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
  auto gone = [&] { return sink.is_writable && !sink.is_writable(); };
  if (!write(fmt.start(f.prompt_ids))) {
    f.abandon("client-left");
    return false;
  }
  EngineEvent e;
  for (;;) {
    Flight::Wait w = f.next(&e, gone);
    if (w == Flight::Wait::ClientLeft) {
      f.abandon("client-left");
      return false;
    }
    if (w == Flight::Wait::Stopping) {
      write(fmt.error(stopping_error()));
      write(sse_done());
      sink.done();
      f.abandon("shutdown");
      return true;
    }
    bool ok = true;
    switch (e.kind) {
      case EngineEvent::Kind::Started:
        f.prompt_ids = e.prompt_ids;
        break;
      case EngineEvent::Kind::Token: {
        size_t n_lp = f.logprobs.size();
        f.absorb_token(e);
        // Tokens that complete no text yet (a split UTF-8 character) are sent with the next one,
        // unless the client asked for per-token data.
        if (e.text.empty() && (e.token < 0 || (!f.header.logprobs && !f.header.return_token_ids))) break;
        std::vector<LogprobText> lps(f.logprobs.begin() + static_cast<long>(n_lp), f.logprobs.end());
        ok = write(
            fmt.tokens(e.text, e.token >= 0 ? std::vector<int32_t>{e.token} : std::vector<int32_t>{}, lps));
        break;
      }
      case EngineEvent::Kind::Error:
        write(fmt.error(engine_error(e)));
        write(sse_done());
        sink.done();
        f.finish_log("error");
        return true;
      case EngineEvent::Kind::Finished:
        f.usage = e.usage;
        ok =
            write(fmt.finish(e.finish_reason, f.token_ids)) && write(fmt.usage(f.usage)) && write(sse_done());
        if (!ok) {
          f.abandon("client-left");
          return false;
        }
        sink.done();
        f.finish_log(e.finish_reason);
        return true;
    }
    if (!ok) {
      f.abandon("client-left");
      return false;
    }
  }
}

}  // namespace

void handle_generation(ServerState& st, const httplib::Request& req, httplib::Response& res, bool chat) {
  std::shared_ptr<EngineApi> engine = st.ready_engine(res);
  if (!engine) return;
  ParsedRequest pr;
  if (auto err = parse_generation_request(req.body, chat ? Endpoint::Chat : Endpoint::Completion,
                                          st.parse_context(engine.get()), &pr))
    return send_error(res, *err);

  auto f = std::make_shared<Flight>();
  f->st = &st;
  f->engine = engine;
  f->header = ResponseHeader{new_id(chat ? "chatcmpl-" : "cmpl-"),
                             static_cast<int64_t>(std::time(nullptr)),
                             st.options.served_name(),
                             chat,
                             pr.return_token_ids,
                             pr.gen.logprobs,
                             pr.include_usage};
  pr.gen.id = f->header.id;
  f->cancelled = pr.gen.cancelled;
  f->fd = find_connection_fd(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  f->channel = engine->submit(std::move(pr.gen));

  if (!pr.stream) return run_non_stream(*f, res);

  // Hold the status line until the first token: an error the engine reports before any token
  // (bad image, context too long) is answered with its own status even for a stream.
  EngineEvent e;
  for (;;) {
    Flight::Wait w = f->next(&e, nullptr);
    if (w == Flight::Wait::ClientLeft) return f->abandon("client-left");
    if (w == Flight::Wait::Stopping) {
      f->abandon("shutdown");
      return send_error(res, stopping_error());
    }
    if (e.kind == EngineEvent::Kind::Started) {
      f->prompt_ids = e.prompt_ids;
      continue;
    }
    if (e.kind == EngineEvent::Kind::Error) {
      f->finish_log("error");
      return send_error(res, engine_error(e));
    }
    f->held = std::move(e);
    break;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [f](size_t /*offset*/, httplib::DataSink& sink) { return run_stream(*f, sink); },
      [f](bool /*success*/) {
        // The provider never ran (headers could not be written): the client is gone.
        if (!f->done) f->abandon("client-left");
      });
}

}  // namespace tf
