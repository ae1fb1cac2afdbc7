// `tensorfold serve`: flag parsing and startup. main.cpp passes the engine factory, so the CLI
// decides which engine runs and the server stays engine-agnostic.
#pragma once
#include "server/serve_run.h"

namespace tf {

// argv[0] is the subcommand ("serve"); flags follow. Exit codes: 0 (help, or a clean shutdown on
// SIGINT/SIGTERM), 1 (bind or load failed), 2 (bad flags).
int serve_main(int argc, char** argv, const EngineFactory& factory);

}  // namespace tf
