// Runs tests/e2e/run_e2e.mjs (the official openai@6 Node client) against this server with the fake
// engine, so the HTTP layer is checked with the real client before the real engine exists.
// Skips (never passes) where node or the npm package is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "test_server_util.h"

namespace tf::testing {
namespace {

TEST(NodeOpenAiClient, E2eScriptAgainstFakeEngine) {
  const std::string root = TF_SOURCE_DIR;
  if (std::system("node --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(root + "/tests/e2e/node_modules/openai/package.json"))
    GTEST_SKIP() << "tests/e2e/node_modules/openai is missing (run tests/e2e/setup.sh)";
  TestServer s;
  s.engine->token_delay = std::chrono::milliseconds(20);
  std::string cmd = "TF_BASE_URL=http://127.0.0.1:" + std::to_string(s.port) + " node " + root +
                    "/tests/e2e/run_e2e.mjs 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find(" 0 failed"), std::string::npos) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  // The abort check in the script saw the engine drop the request.
  EXPECT_GE(s.engine->cancels_seen(), 1) << out;
}

}  // namespace
}  // namespace tf::testing
