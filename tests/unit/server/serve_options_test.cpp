// `tensorfold serve` flag parsing: defaults, every flag, and the error line for bad input.
#include <gtest/gtest.h>

#include "server/serve_options.h"

namespace tf {
namespace {

Expected<ServeArgs> parse(std::vector<std::string> a) { return parse_serve_args(a); }

std::string error_of(std::vector<std::string> a) {
  auto r = parse(std::move(a));
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

TEST(ServeOptions, Defaults) {
  auto r = parse({"/models/tiny-ocr/"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ServeOptions& o = r->options;
  EXPECT_EQ(o.checkpoint, "/models/tiny-ocr/");
  EXPECT_EQ(o.served_name(), "tiny-ocr");
  EXPECT_EQ(o.backend, "auto");
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 8080);
  EXPECT_EQ(o.parallel, 32);
  EXPECT_EQ(o.context, 0);
  EXPECT_FALSE(o.vision || o.no_thinking || o.no_drafts || o.enforce_eager || r->help);
  EXPECT_FALSE(o.temperature.has_value());
  EXPECT_FALSE(o.max_tokens.has_value());
  EXPECT_EQ(o.max_body_mb, 64);
  EXPECT_EQ(o.max_image_pixels, 89478485);
  EXPECT_EQ(o.cache_mb, 1024);
  EXPECT_TRUE(o.api_key.empty() && o.allowed_media_dir.empty());
}

TEST(ServeOptions, EveryFlag) {
  auto r = parse({"--backend",
                  "cuda",
                  "ckpt",
                  "--vision",
                  "--context",
                  "8192",
                  "--parallel=8",
                  "--no-thinking",
                  "--name",
                  "ocr",
                  "--host",
                  "0.0.0.0",
                  "--port",
                  "0",
                  "--temperature",
                  "0.2",
                  "--max-tokens",
                  "512",
                  "--api-key",
                  "sk-1",
                  "--max-body-mb",
                  "16",
                  "--max-image-pixels",
                  "1000000",
                  "--allowed-media-dir",
                  "/tmp",
                  "--cache-mb",
                  "256",
                  "--no-drafts",
                  "--enforce-eager"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ServeOptions& o = r->options;
  EXPECT_EQ(o.checkpoint, "ckpt");
  EXPECT_EQ(o.backend, "cuda");
  EXPECT_TRUE(o.vision && o.no_thinking && o.no_drafts && o.enforce_eager);
  EXPECT_EQ(o.context, 8192);
  EXPECT_EQ(o.parallel, 8);
  EXPECT_EQ(o.served_name(), "ocr");
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 0);
  EXPECT_FLOAT_EQ(*o.temperature, 0.2f);
  EXPECT_EQ(*o.max_tokens, 512);
  EXPECT_EQ(o.api_key, "sk-1");
  EXPECT_EQ(o.max_body_mb, 16);
  EXPECT_EQ(o.max_image_pixels, 1000000);
  EXPECT_EQ(o.allowed_media_dir, "/tmp");
  EXPECT_EQ(o.cache_mb, 256);
}

TEST(ServeOptions, Errors) {
  EXPECT_EQ(error_of({}),
            "missing CKPT (a checkpoint directory); usage: tensorfold serve CKPT [flags], see --help");
  EXPECT_EQ(error_of({"a", "b"}), "unexpected argument 'b': only one CKPT is accepted");
  EXPECT_EQ(error_of({"a", "--prot", "1"}), "unknown flag --prot (see tensorfold serve --help)");
  EXPECT_EQ(error_of({"a", "-p"}), "unknown flag -p (see tensorfold serve --help)");
  EXPECT_EQ(error_of({"a", "--port"}), "--port needs a value (N)");
  EXPECT_EQ(error_of({"a", "--port", "80x"}), "--port expects an integer, got '80x'");
  EXPECT_EQ(error_of({"a", "--port", "70000"}), "--port must be between 0 and 65535, got 70000");
  EXPECT_EQ(error_of({"a", "--parallel", "0"}), "--parallel must be between 1 and 1024, got 0");
  EXPECT_EQ(error_of({"a", "--backend", "tpu"}), "--backend must be auto, cpu or cuda, got 'tpu'");
  EXPECT_EQ(error_of({"a", "--temperature", "-1"}), "--temperature must be between 0 and 100, got -1");
  EXPECT_EQ(error_of({"a", "--temperature", "nan"}), "--temperature expects a number, got 'nan'");
  EXPECT_EQ(error_of({"a", "--max-tokens", "0"}), "--max-tokens must be between 1 and 16777216, got 0");
  EXPECT_EQ(error_of({"a", "--vision=1"}), "--vision takes no value");
  EXPECT_EQ(error_of({"a", "--name", ""}), "--name must not be empty");
  EXPECT_EQ(error_of({"a", "--drafts", "fast"}), "--drafts must be auto, copy, mtp or off, got 'fast'");
  EXPECT_EQ(error_of({"a", "--allowed-media-dir", "/nonexistent/dir"}),
            "--allowed-media-dir '/nonexistent/dir' is not an existing directory");
  EXPECT_EQ(error_of({"a", "--devices", "0,x"}), "--devices expects an integer, got 'x'");
  EXPECT_EQ(error_of({"a", "--devices", "0,"}), "--devices expects an integer, got ''");
  EXPECT_EQ(error_of({"a", "--devices", "1,1"}), "--devices lists GPU 1 twice");
  EXPECT_EQ(error_of({"a", "--replicas", "0"}), "--replicas must be between 1 and 64, got 0");
  EXPECT_EQ(error_of({"a", "--devices", "0,1", "--replicas", "2"}),
            "--devices and --replicas exclude each other (--devices runs one engine per GPU)");
  EXPECT_EQ(error_of({"a", "--devices", "0", "--backend", "cpu"}),
            "--devices names GPUs: it cannot run with --backend cpu");
}

TEST(ServeOptions, DevicesAndReplicas) {
  auto r = parse({"a", "--devices", "0,3,1"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->options.devices, (std::vector<int>{0, 3, 1}));
  EXPECT_EQ(r->options.replicas, 1);
  r = parse({"a", "--replicas=3", "--backend", "cpu"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->options.devices.empty());
  EXPECT_EQ(r->options.replicas, 3);
}

TEST(ServeOptions, HelpListsEveryFlagWithDefault) {
  auto r = parse({"--help"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->help);
  EXPECT_TRUE(parse({"-h"})->help);
  std::string h = serve_help();
  for (const char* flag : {"--backend",
                           "--vision",
                           "--context",
                           "--parallel",
                           "--no-thinking",
                           "--name",
                           "--host",
                           "--port",
                           "--temperature",
                           "--max-tokens",
                           "--api-key",
                           "--max-body-mb",
                           "--max-image-pixels",
                           "--allowed-media-dir",
                           "--cache-mb",
                           "--no-drafts",
                           "--drafts",
                           "--devices",
                           "--replicas",
                           "--enforce-eager"}) {
    size_t at = h.find(std::string("  ") + flag + " ");
    ASSERT_NE(at, std::string::npos) << flag;
    std::string line = h.substr(at, h.find('\n', at) - at);
    EXPECT_NE(line.find("default"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace tf
