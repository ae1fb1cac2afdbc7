// Error reporting and the limits that keep an untrusted template from hanging or exhausting memory.
#include <gtest/gtest.h>

#include <chrono>

#include "text/jinja/template.h"

namespace {

using json = nlohmann::ordered_json;

std::string parse_error(const std::string& src) {
  auto t = tf::jinja::Template::parse(src);
  return t.ok() ? std::string("<parsed>") : t.error().message;
}

std::string render_error(const std::string& src, const json& ctx = json::object()) {
  auto t = tf::jinja::Template::parse(src);
  if (!t.ok()) return "<parse error> " + t.error().message;
  auto out = t->render(ctx);
  return out.ok() ? std::string("<rendered>") : out.error().message;
}

void expect_one_line(const std::string& msg) {
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_FALSE(msg.empty());
}

TEST(JinjaErrors, UnknownFilterNamesFilterAndLine) {
  const std::string msg = parse_error("a\nb\n{{ x | nosuch }}");
  EXPECT_EQ(msg, "chat template line 3: No filter named 'nosuch'.");
}

TEST(JinjaErrors, UnsupportedFilterNamesFilterAndLine) {
  const std::string msg = parse_error("line one\n{{ text | wordwrap(10) }}");
  EXPECT_EQ(msg, "chat template line 2: unsupported filter 'wordwrap'");
}

TEST(JinjaErrors, UnsupportedTagsAreRefused) {
  EXPECT_EQ(parse_error("{% include 'x' %}"), "chat template line 1: unsupported tag 'include'");
  EXPECT_EQ(parse_error("\n{% for x in y recursive %}{% endfor %}"),
            "chat template line 2: unsupported: recursive for loops");
}

TEST(JinjaErrors, UnclosedBlockNamesTheExpectedTag) {
  const std::string msg = parse_error("{% for m in messages %}\n{{ m }}\n");
  expect_one_line(msg);
  EXPECT_EQ(msg.rfind("chat template line 2: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("'endfor'"), std::string::npos) << msg;
}

TEST(JinjaErrors, BadSyntaxHasLine) {
  const std::string msg = parse_error("ok\n\n\n{{ 1 + }}");
  expect_one_line(msg);
  EXPECT_EQ(msg.rfind("chat template line 4: ", 0), 0u) << msg;
  EXPECT_EQ(parse_error("{{ 'unterminated }}").rfind("chat template line 1: ", 0), 0u);
  EXPECT_EQ(parse_error("x\n{# never closed").rfind("chat template line 2: ", 0), 0u);
}

TEST(JinjaErrors, InvalidUtf8TemplateIsRefused) {
  EXPECT_NE(parse_error(std::string("{{ 'a\xff' }}")).find("UTF-8"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionMessageIsVerbatim) {
  EXPECT_EQ(render_error("x\n{{ raise_exception('System message must be at the beginning.') }}"),
            "System message must be at the beginning.");
}

TEST(JinjaErrors, RuntimeErrorsHaveLineAndClass) {
  const std::string msg = render_error("a\n{{ missing.attr }}");
  expect_one_line(msg);
  EXPECT_EQ(msg.rfind("chat template line 2: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("UndefinedError"), std::string::npos) << msg;
  EXPECT_NE(render_error("{{ [1].append(2) }}").find("SecurityError"), std::string::npos);
}

TEST(JinjaErrors, BadContextIsRefused) {
  auto t = tf::jinja::Template::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(json::array({1})).ok());
  EXPECT_FALSE(t->render(json::parse(R"({"x": 18446744073709551615})")).ok());
}

TEST(JinjaLimits, StepLimitStopsRunawayLoops) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}");
  EXPECT_NE(msg.find("step limit"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  EXPECT_NE(render_error("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}").find("size limit"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'x' * 1000000000000 }}").find("size limit"), std::string::npos);
  EXPECT_NE(render_error("{{ [1] * 1000000000000 }}").find("size limit"), std::string::npos);
  EXPECT_NE(render_error("{{ 'ab'.center(1000000000000) }}").find("size limit"), std::string::npos);
}

TEST(JinjaLimits, RecursionIsBounded) {
  EXPECT_NE(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("depth"), std::string::npos);
  const std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(parse_error("{{ " + deep + " }}").find("too deep"), std::string::npos);
  EXPECT_NE(parse_error("{{ " + std::string(5000, '-') + "1 }}").find("too deep"), std::string::npos);
  EXPECT_NE(parse_error("{{ x" + std::string(5000, '|') + " }}").find("line 1"), std::string::npos);
  std::string nested;
  for (int i = 0; i < 1000; ++i) nested += "{% if true %}";
  EXPECT_NE(parse_error(nested).find("too deep"), std::string::npos);
}

// Destroying, comparing or printing a value recurses through its levels, so nesting is bounded
// wherever it can grow: a context, a list built in a loop, a chain of namespaces being printed.
TEST(JinjaLimits, NestingIsBounded) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_NE(render_error("{{ x|length }}", json{{"x", json::parse(deep)}}).find("nested more than 1000"),
            std::string::npos);
  const std::string ok = std::string(900, '[') + std::string(900, ']');
  EXPECT_EQ(render_error("{{ x|length }}", json{{"x", json::parse(ok)}}), "<rendered>");
  EXPECT_NE(render_error("{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}"
                         "{% endfor %}")
                .find("nested more than 1000"),
            std::string::npos);
  EXPECT_NE(
      render_error("{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = {'a': ns.x} %}"
                   "{% endfor %}")
          .find("nested more than 1000"),
      std::string::npos);
  EXPECT_NE(
      render_error("{% set ns = namespace(x=0) %}{% for i in range(3000) %}{% set ns.x = namespace(y=ns.x) %}"
                   "{% endfor %}{{ ns.x }}")
          .find("recursion depth"),
      std::string::npos);
}

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 64 }}").find("overflow"), std::string::npos);
}

TEST(JinjaTemplate, ReusableAndGenerationTagRendersItsBody) {
  // Transformers' AssistantTracker `{% generation %}` tag renders its body unchanged.
  auto a = tf::jinja::Template::parse(
      "{% for m in messages %}{% generation %}[{{ m }}]{% endgeneration %}{% endfor %}");
  auto b = tf::jinja::Template::parse("{% for m in messages %}[{{ m }}]{% endfor %}");
  ASSERT_TRUE(a.ok() && b.ok());
  const json ctx = json::parse(R"({"messages": ["x", "y"]})");
  for (int i = 0; i < 2; ++i) {
    auto ra = a->render(ctx), rb = b->render(ctx);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(*ra, *rb);
  }
}

}  // namespace
