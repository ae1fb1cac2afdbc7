// Request parsing and validation: every refusal has its exact message and param; accepted fields
// land in GenerationRequest, with "not given" kept distinguishable for generation_config defaults.
#include <gtest/gtest.h>

#include "server/request_parse.h"

namespace tf {
namespace {

const char* kPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

ParseContext ctx() {
  ParseContext c;
  c.served_name = "tiny";
  c.accepted_models = {"tiny", "/ckpt/tiny"};
  c.vision = true;
  return c;
}

std::string chat(const std::string& extra, const std::string& content = "\"hi\"") {
  return R"({"model":"tiny","messages":[{"role":"user","content":)" + content + "}]" +
         (extra.empty() ? "" : "," + extra) + "}";
}

ApiError refuse(const std::string& body, Endpoint ep = Endpoint::Chat, const ParseContext& c = ctx()) {
  ParsedRequest out;
  auto err = parse_generation_request(body, ep, c, &out);
  EXPECT_TRUE(err.has_value()) << "accepted: " << body;
  return err.value_or(ApiError{});
}

ParsedRequest accept(const std::string& body, Endpoint ep = Endpoint::Chat, const ParseContext& c = ctx()) {
  ParsedRequest out;
  auto err = parse_generation_request(body, ep, c, &out);
  EXPECT_FALSE(err.has_value()) << body << " -> " << (err ? err->message : "");
  return out;
}

struct Case {
  std::string body;
  std::string message;
  std::string param;
};

TEST(RequestParse, EveryRefusalHasItsMessageAndParam) {
  const std::vector<Case> cases = {
      {"{\"model\": ", "request body is not valid JSON", ""},
      {"[1,2]", "request body must be a JSON object", ""},
      {R"({"model":7,"messages":[]})", "'model' must be a string", "model"},
      {R"({"model":"tiny"})", "'messages' is required", "messages"},
      {R"({"messages":[]})", "'messages' must be a non-empty array", "messages"},
      {R"({"messages":"hi"})", "'messages' must be a non-empty array", "messages"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})",
       "'messages[0].role' must be one of system, user, assistant, tool, developer", "messages[0].role"},
      {chat("", "42"), "'messages[0].content' must be a string or an array of content parts",
       "messages[0].content"},
      {chat("", R"([{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}])"),
       "content parts must be text or image_url; audio and video inputs are unsupported",
       "messages[0].content[0].type"},
      {chat("", R"([{"type":"video_url","video_url":{"url":"data:video/mp4;base64,AAAA"}}])"),
       "content parts must be text or image_url; audio and video inputs are unsupported",
       "messages[0].content[0].type"},
      {chat("", R"([{"type":"text","text":5}])"), "'messages[0].content[0].text' must be a string",
       "messages[0].content[0].text"},
      {chat("", R"([{"text":"x"}])"), "'messages[0].content[0]' must be an object with a string 'type'",
       "messages[0].content[0]"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}])"),
       "image 1: http(s) image URLs are not fetched by this server; send the image inline as a base64 data: "
       "URL",
       "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}])"),
       "image 1: unsupported image URL; send a base64 data: URL (data:image/png;base64,...)",
       "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGODlh"}}])"),
       "image 1 is not PNG, JPEG or WebP; send one of those", "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"data:image/png,rawbytes"}}])"),
       "image 1: data: URLs must be base64-encoded (data:image/png;base64,...)",
       "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR*0K"}}])"),
       "image 1: invalid base64: unexpected character at offset 5", "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0"}}])"),
       "image 1: invalid base64: length is not a multiple of 4", "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}])"),
       "image 1: the data: URL holds no bytes", "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}])"),
       "image 1: file:// image URLs are disabled; start the server with --allowed-media-dir DIR or send the "
       "image "
       "as a data: URL",
       "messages[0].content[0].image_url"},
      {chat("", R"([{"type":"image_url","image_url":{}}])"),
       "'messages[0].content[0].image_url.url' must be a string", "messages[0].content[0].image_url.url"},
      {chat(R"("stream":"yes")"), "'stream' must be a boolean", "stream"},
      {chat(R"("stream":true,"stream_options":{"include_usage":1})"),
       "'stream_options.include_usage' must be a boolean", "stream_options.include_usage"},
      {chat(R"("stream_options":[])"), "'stream_options' must be an object", "stream_options"},
      {chat(R"("max_tokens":0)"), "'max_tokens' must be at least 1, got 0", "max_tokens"},
      {chat(R"("max_tokens":-5)"), "'max_tokens' must be at least 1, got -5", "max_tokens"},
      {chat(R"("max_tokens":1.5)"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens":"10")"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens":99999999999)"), "'max_tokens' is too large, got 99999999999", "max_tokens"},
      {chat(R"("max_completion_tokens":0)"), "'max_completion_tokens' must be at least 1, got 0",
       "max_completion_tokens"},
      {chat(R"("temperature":-0.5)"), "'temperature' must be between 0 and 100, got -0.5", "temperature"},
      {chat(R"("temperature":100.5)"), "'temperature' must be between 0 and 100, got 100.5", "temperature"},
      {chat(R"("temperature":"hot")"), "'temperature' must be a number", "temperature"},
      {chat(R"("top_p":0)"), "'top_p' must be in (0, 1], got 0", "top_p"},
      {chat(R"("top_p":1.5)"), "'top_p' must be in (0, 1], got 1.5", "top_p"},
      {chat(R"("top_k":-1)"), "'top_k' must be 0 (off) or positive, got -1", "top_k"},
      {chat(R"("top_k":2.5)"), "'top_k' must be an integer", "top_k"},
      {chat(R"("seed":"abc")"), "'seed' must be an integer", "seed"},
      {chat(R"("stop":5)"), "'stop' must be a string or a list of non-empty strings", "stop"},
      {chat(R"("stop":["ok",""])"), "'stop' must be a string or a list of non-empty strings", "stop"},
      {chat(R"("n":2)"), "only n=1 is supported, got n=2", "n"},
      {chat(R"("n":0)"), "only n=1 is supported, got n=0", "n"},
      {chat(R"("return_token_ids":"yes")"), "'return_token_ids' must be a boolean", "return_token_ids"},
      {chat(R"("ignore_eos":1)"), "'ignore_eos' must be a boolean", "ignore_eos"},
      {chat(R"("chat_template_kwargs":[])"), "'chat_template_kwargs' must be an object",
       "chat_template_kwargs"},
      {chat(R"("logprobs":"true")"), "'logprobs' must be a boolean", "logprobs"},
      {chat(R"("logprobs":true,"top_logprobs":21)"), "'top_logprobs' must be between 0 and 20, got 21",
       "top_logprobs"},
      {chat(R"("top_logprobs":3)"), "'top_logprobs' requires 'logprobs': true", "top_logprobs"},
      {chat(R"("tools":{})"), "'tools' must be an array", "tools"},
  };
  for (const Case& c : cases) {
    ApiError e = refuse(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.message, c.message) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
  }
}

// OpenAI and vLLM: an unknown model is 404 model_not_found, on every route that takes `model`.
TEST(RequestParse, UnknownModelIs404OnEveryRoute) {
  const std::string msg = "model 'gpt-4o' is not served here; this server serves 'tiny'";
  const std::vector<std::pair<Endpoint, std::string>> routes = {
      {Endpoint::Chat, R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})"},
      {Endpoint::Completion, R"({"model":"gpt-4o","prompt":"x"})"},
      {Endpoint::Tokenize, R"({"model":"gpt-4o","prompt":"x"})"},
      {Endpoint::Tokenize, R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})"},
  };
  for (const auto& [ep, body] : routes) {
    ApiError e = refuse(body, ep);
    EXPECT_EQ(e.status, 404) << body;
    EXPECT_EQ(e.code, "model_not_found") << body;
    EXPECT_EQ(e.message, msg) << body;
    EXPECT_EQ(error_json(e)["error"]["type"], "invalid_request_error") << body;
  }
  std::vector<int32_t> ids;
  auto d = parse_detokenize_request(R"({"model":"gpt-4o","tokens":[1]})", ctx(), &ids);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->status, 404);
  EXPECT_EQ(d->code, "model_not_found");
  EXPECT_EQ(d->message, msg);
  // The served name itself is accepted everywhere.
  EXPECT_FALSE(parse_detokenize_request(R"({"model":"tiny","tokens":[1]})", ctx(), &ids).has_value());
}

// Found by the request_json fuzzer: a model name with a newline made a two-line message. Client
// strings are escaped and cut; the message stays one line.
TEST(RequestParse, ClientStringsInMessagesStayOneLine) {
  ApiError e = refuse(R"({"model":"a\nb\u0001c\td","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(e.message, "model 'a\\nb\\u0001c\\td' is not served here; this server serves 'tiny'");
  const std::string long_name(5000, 'x');
  e = refuse(R"({"model":")" + long_name + R"(","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(e.message,
            "model '" + std::string(80, 'x') + "...' is not served here; this server serves 'tiny'");
  EXPECT_EQ(user_text("\xc3\xa9\xc3\xa9", 3), "\xc3\xa9...");  // cut at a UTF-8 boundary
  EXPECT_EQ(bad_request("two\nlines").message, "two\\nlines");
}

TEST(RequestParse, ImagesRefusedWithoutVision) {
  ParseContext c = ctx();
  c.vision = false;
  std::string img =
      std::string(R"([{"type":"image_url","image_url":{"url":"data:image/png;base64,)") + kPng + "\"}}]";
  ApiError e = refuse(chat("", img), Endpoint::Chat, c);
  EXPECT_EQ(
      e.message,
      "image inputs are unsupported: this server runs without a vision encoder (start it with --vision on a "
      "vision checkpoint)");
}

TEST(RequestParse, CompletionRefusals) {
  const std::vector<Case> cases = {
      {R"({"model":"tiny"})", "'prompt' is required", "prompt"},
      {R"({"prompt":""})", "'prompt' must not be empty", "prompt"},
      {R"({"prompt":[]})", "'prompt' must be a string or a list of token ids (one prompt per request)",
       "prompt"},
      {R"({"prompt":["a","b"]})", "'prompt' must be a string or a list of token ids (one prompt per request)",
       "prompt"},
      {R"({"prompt":[1,-2]})", "'prompt' token ids must be non-negative 32-bit integers", "prompt"},
      {R"({"prompt":[1,4294967296]})", "'prompt' token ids must be non-negative 32-bit integers", "prompt"},
      {R"({"prompt":"x","logprobs":21})", "'logprobs' must be between 0 and 20, got 21", "logprobs"},
      {R"({"prompt":"x","logprobs":true})", "'logprobs' must be an integer", "logprobs"},
      {R"({"prompt":"x","echo":true})", "'echo' is unsupported", "echo"},
      {R"({"prompt":"x","best_of":3})", "only best_of=1 is supported, got 3", "best_of"},
  };
  for (const Case& c : cases) {
    ApiError e = refuse(c.body, Endpoint::Completion);
    EXPECT_EQ(e.message, c.message) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
  }
}

TEST(RequestParse, TokenizeNeedsExactlyOneInput) {
  EXPECT_EQ(
      refuse(R"({"prompt":"a","messages":[{"role":"user","content":"x"}]})", Endpoint::Tokenize).message,
      "give exactly one of 'messages' or 'prompt'");
  EXPECT_EQ(refuse(R"({})", Endpoint::Tokenize).message, "give exactly one of 'messages' or 'prompt'");
  ParsedRequest p = accept(R"({"prompt":[5,6]})", Endpoint::Tokenize);
  ASSERT_TRUE(p.gen.prompt_ids.has_value());
  EXPECT_EQ(*p.gen.prompt_ids, (std::vector<int32_t>{5, 6}));
}

TEST(RequestParse, AcceptedFieldsReachTheRequest) {
  std::string content =
      std::string(
          R"([{"type":"text","text":"read"},{"type":"image_url","image_url":{"url":"data:image/png;base64,)") +
      kPng + "\"}}]";
  ParsedRequest p =
      accept(chat(R"("stream":true,"stream_options":{"include_usage":true},"max_tokens":7,)"
                  R"("max_completion_tokens":9,"temperature":0.7,"top_p":0.9,"top_k":40,"seed":-1,)"
                  R"("stop":["\n\n","END"],"n":1,"return_token_ids":true,"ignore_eos":true,)"
                  R"("logprobs":true,"top_logprobs":3,"chat_template_kwargs":{"enable_thinking":true})",
                  content));
  const GenerationRequest& g = p.gen;
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_TRUE(p.return_token_ids);
  EXPECT_TRUE(p.chat);
  EXPECT_EQ(g.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_EQ(g.sampling.seed, ~uint64_t{0});
  EXPECT_TRUE(g.sampling_given.temperature && g.sampling_given.top_p && g.sampling_given.top_k &&
              g.sampling_given.seed);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(g.ignore_eos);
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 3);
  EXPECT_EQ(g.chat_template_kwargs["enable_thinking"], true);
  ASSERT_EQ(g.images.size(), 1u);
  EXPECT_EQ(g.images[0].size(), 70u);  // the decoded 1x1 PNG
  EXPECT_EQ(g.images[0][1], 'P');
  ASSERT_TRUE(g.messages.has_value());
  // The image part keeps its place; its URL is now a reference, not the base64 payload.
  EXPECT_EQ((*g.messages)[0]["content"][1]["image_url"]["url"], "image:1");
  EXPECT_EQ((*g.messages)[0]["content"][0]["text"], "read");
}

TEST(RequestParse, SilentFieldsStayUnset) {
  ParsedRequest p = accept(chat(""));
  EXPECT_FALSE(p.gen.sampling_given.temperature || p.gen.sampling_given.top_p || p.gen.sampling_given.top_k ||
               p.gen.sampling_given.seed);
  EXPECT_EQ(p.gen.max_tokens, 0);
  EXPECT_FALSE(p.stream);
  EXPECT_TRUE(p.gen.use_drafts);
  EXPECT_TRUE(p.gen.chat_template_kwargs.empty());
  // Nulls are treated as absent, as OpenAI clients send them.
  ParsedRequest q = accept(chat(R"("temperature":null,"max_tokens":null,"stop":null,"seed":null)"));
  EXPECT_FALSE(q.gen.sampling_given.temperature);
  EXPECT_EQ(q.gen.max_tokens, 0);
}

TEST(RequestParse, ServeFlagsFillOnlySilentFields) {
  ParseContext c = ctx();
  c.default_temperature = 0.2f;
  c.default_max_tokens = 100;
  c.no_thinking = true;
  c.no_drafts = true;
  ParsedRequest silent = accept(chat(""), Endpoint::Chat, c);
  EXPECT_FLOAT_EQ(silent.gen.sampling.temperature, 0.2f);
  EXPECT_TRUE(silent.gen.sampling_given.temperature);
  EXPECT_EQ(silent.gen.max_tokens, 100);
  EXPECT_EQ(silent.gen.chat_template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(silent.gen.use_drafts);
  ParsedRequest set =
      accept(chat(R"("temperature":0,"max_tokens":5,"chat_template_kwargs":{"enable_thinking":true})"),
             Endpoint::Chat, c);
  EXPECT_FLOAT_EQ(set.gen.sampling.temperature, 0.0f);
  EXPECT_EQ(set.gen.max_tokens, 5);
  EXPECT_EQ(set.gen.chat_template_kwargs["enable_thinking"], true);
}

TEST(RequestParse, CompletionPrompts) {
  EXPECT_EQ(*accept(R"({"prompt":"abc"})", Endpoint::Completion).gen.prompt_text, "abc");
  EXPECT_EQ(*accept(R"({"prompt":["abc"]})", Endpoint::Completion).gen.prompt_text, "abc");
  EXPECT_EQ(*accept(R"({"prompt":[1,2,3]})", Endpoint::Completion).gen.prompt_ids,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*accept(R"({"prompt":[[4,5]]})", Endpoint::Completion).gen.prompt_ids,
            (std::vector<int32_t>{4, 5}));
  ParsedRequest lp = accept(R"({"prompt":"x","logprobs":2})", Endpoint::Completion);
  EXPECT_TRUE(lp.gen.logprobs);
  EXPECT_EQ(lp.gen.top_logprobs, 2);
  EXPECT_FALSE(lp.chat);
}

TEST(RequestParse, Detokenize) {
  std::vector<int32_t> ids;
  EXPECT_FALSE(parse_detokenize_request(R"({"tokens":[1,2]})", ctx(), &ids).has_value());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  auto e = parse_detokenize_request(R"({"tokens":[1,-1]})", ctx(), &ids);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "'tokens' must hold non-negative 32-bit token ids");
  e = parse_detokenize_request(R"({"tokens":"12"})", ctx(), &ids);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "'tokens' must be a list of token ids");
}

}  // namespace
}  // namespace tf
