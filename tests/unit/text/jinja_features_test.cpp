// Jinja engine vs Python Jinja2 3.1.6 configured like Transformers' chat-template environment.
// Expected outputs come from tools/reference/jinja_cases.py (tests/golden/jinja/features.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "text/jinja/template.h"

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Cases Python renders but this engine refuses on purpose (an error naming the construct).
const std::set<std::string> kUnsupported = {
    "f_unsupported_wordwrap",  // wordwrap: not used by chat templates
    "f_print_generator",       // Python prints "<generator object ... at 0x...>"
    "nesting_too_deep",        // lists nested > kMaxNesting levels: destroying them would recurse as deep
};

TEST(JinjaFeatures, MatchPythonJinja2) {
  const fs::path path = fs::path(TF_SOURCE_DIR) / "tests/golden/jinja/features.json";
  if (!fs::exists(path)) GTEST_SKIP() << "missing " << path;
  const json doc = json::parse(read_text(path));
  const json& ctx = doc.at("context");
  int n_ok = 0, n_err = 0, n_unsupported = 0;
  for (const auto& c : doc.at("cases")) {
    const std::string name = c.at("name");
    const std::string src = c.at("template");
    tf::jinja::Template tpl;
    tf::jinja::RenderError err;
    std::string out;
    const bool parsed = tf::jinja::Template::parse_detailed(src, &tpl, &err);
    const bool rendered = parsed && tpl.render_detailed(ctx, &out, &err);
    if (kUnsupported.count(name)) {
      EXPECT_FALSE(rendered) << name << ": expected an 'unsupported' error, rendered " << out;
      EXPECT_NE(err.message.find("unsupported"), std::string::npos) << name << ": " << err.message;
      ++n_unsupported;
      continue;
    }
    if (c.contains("expected")) {
      EXPECT_TRUE(rendered) << name << ": " << err.kind << " line " << err.line << ": " << err.message << "\n"
                            << src;
      if (!rendered) continue;
      EXPECT_EQ(out, c["expected"].get<std::string>()) << name << "\n" << src;
      ++n_ok;
      continue;
    }
    const json& e = c.at("error");
    EXPECT_FALSE(rendered) << name << ": Python raised " << e.dump() << " but this rendered: " << out;
    if (rendered) continue;
    const bool unsupported = err.message.find("unsupported") != std::string::npos;
    const bool py_parse = e.at("phase") == "parse";
    if (!unsupported) {
      EXPECT_EQ(py_parse, !parsed) << name << ": error phase differs: " << err.message << " vs " << e.dump();
    }
    const std::string type = e.at("type");
    if (type == "TemplateError") {
      EXPECT_TRUE(err.user_raised) << name;
      EXPECT_EQ(err.message, e.at("message").get<std::string>()) << name;
    }
    if ((type == "TemplateSyntaxError" || type == "TemplateAssertionError") && e.contains("line") &&
        !e["line"].is_null()) {
      EXPECT_EQ(err.line, e["line"].get<int>()) << name << ": " << err.message;
    }
    if (type == "UndefinedError" || type == "SecurityError" || type == "TypeError" || type == "ValueError" ||
        type == "ZeroDivisionError" || type == "TemplateAssertionError" || type == "TemplateSyntaxError") {
      if (!unsupported) {
        EXPECT_EQ(err.kind, type) << name << ": " << err.message;
      }
    }
    ++n_err;
  }
  std::printf("jinja features: %d renders equal, %d errors reproduced, %d refused as unsupported\n", n_ok,
              n_err, n_unsupported);
}

}  // namespace
