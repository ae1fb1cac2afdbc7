// tensorfold: one binary, subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/engine_factory.h"
#include "cli/serve_cmd.h"

namespace {
const char* kUsage =
    "usage: tensorfold <command> [args]\n"
    "  ocr CKPT IMAGE...        transcribe images (--help for options)\n"
    "  serve CKPT               OpenAI-compatible server (--help for options)\n"
    "  tokenize CKPT            prompt ids as Transformers computes them\n"
    "  inspect CKPT             admission report: family, dims, parameters, memory, template, tokens\n"
    "  bench URL --images DIR   load generator for OpenAI-compatible servers: pages/s, tok/s, latencies\n";
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "ocr") return tf::cli::ocr_main(argc, argv);
  if (cmd == "tokenize") return tf::cli::tokenize_main(argc, argv);
  if (cmd == "inspect") return tf::cli::inspect_main(argc, argv);
  if (cmd == "bench") return tf::cli::bench_main(argc, argv);
  if (cmd == "serve") return tf::serve_main(argc - 1, argv + 1, tf::cli::engine_factory());
  std::fprintf(stderr, "tensorfold: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 2;
}
