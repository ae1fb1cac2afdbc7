#include "cli/serve_cmd.h"

#include <cstdio>
#include <string>
#include <vector>

namespace tf {

int serve_main(int argc, char** argv, const EngineFactory& factory) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  auto parsed = parse_serve_args(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "tensorfold serve: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(serve_help().c_str(), stdout);
    return 0;
  }
  return run_server(parsed->options, factory);
}

}  // namespace tf
