// `tensorfold bench`: reading one streamed chat completion (Server-Sent Events) into a per-request
// record with its timings. Pure logic, no sockets: bench_client.cpp feeds it the bytes as they arrive.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tf::cli::bench {

// Splits a text/event-stream body into events as the WHATWG EventSource rules do: lines end in \n, \r\n
// or \r (a pair split across two reads counts once); the `data:` lines of an event are joined with \n
// (one optional space after the colon is dropped); a blank line ends the event; comments (":...") and
// other fields are ignored.
class SseParser {
 public:
  // Appends bytes; returns the data of every event completed by them, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // The data of an event the stream left without its closing blank line, if any.
  std::optional<std::string> flush();

 private:
  void end_line(std::vector<std::string>& out);
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool after_cr_ = false;
};

// One request as the client saw it. Times are seconds from the start of its concurrency level.
struct RequestRecord {
  bool started = false;       // false: never sent (the level's time limit came first)
  bool ok = false;            // HTTP 200 and a complete stream with no error event
  bool aborted = false;       // cut by the level's time limit while streaming
  int http_status = 0;        // 0: no HTTP answer (connection refused, reset, timed out)
  std::string error;          // one line, empty when ok (or merely aborted)
  double start_s = 0;         // when it was sent
  double ttft_s = -1;         // first chunk carrying output (text or token ids), from start_s; < 0: none
  double e2e_s = 0;           // from start_s to the end of the stream
  std::vector<double> itl_s;  // gaps between successive output-carrying chunks
  int64_t chunk_tokens = 0;   // output tokens counted from the chunks (token_ids, else 1 per text chunk)
  int64_t usage_tokens = -1;  // usage.completion_tokens when the server sent a usage block
  std::string finish_reason;

  int64_t output_tokens() const { return usage_tokens >= 0 ? usage_tokens : chunk_tokens; }
};

// Turns one streamed response (status, then body bytes with their arrival times) into a RequestRecord.
// Chat chunks (choices[0].delta.content / reasoning_content) and completion chunks (choices[0].text)
// are both understood; `token_ids` on a choice (tensorfold's and vLLM's return_token_ids) counts
// tokens exactly even when they complete no text yet.
class StreamReader {
 public:
  explicit StreamReader(double start_s);
  void on_status(int status);
  void on_bytes(std::string_view bytes, double now_s);
  // transport_error: empty when the HTTP exchange completed; aborted: cut on purpose (time limit).
  RequestRecord finish(double now_s, const std::string& transport_error, bool aborted);
  int64_t chunk_tokens() const { return r_.chunk_tokens; }

 private:
  void on_event(const std::string& data, double now_s);
  SseParser sse_;
  RequestRecord r_;
  std::string body_;  // the start of a non-200 body, for its error message
  double last_output_s_ = -1;
  bool done_ = false;  // "data: [DONE]" seen
};

// The message of a non-200 answer, one line: "HTTP 400: <message>" from OpenAI's
// {"error": {"message": ...}} (or {"error": "..."}, {"detail": ...}, {"message": ...}), else the body.
std::string http_error_message(int status, std::string_view body);

// `s` as one line of at most max_bytes: control characters become spaces, a cut ends in "...".
std::string one_line(std::string_view s, size_t max_bytes = 300);

}  // namespace tf::cli::bench
