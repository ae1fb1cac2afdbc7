// Runs `tensorfold serve` once its flags are parsed: listens at once, loads the engine on a second
// thread through the factory (GET /health answers 503 meanwhile), serves until SIGINT/SIGTERM.
#pragma once
#include <functional>
#include <memory>

#include "base/status.h"
#include "runtime/engine_api.h"
#include "server/serve_options.h"

namespace tf {

// Builds the engine (loads the checkpoint). The engine may also finish loading in the background
// and report ready() later.
using EngineFactory = std::function<Expected<std::unique_ptr<EngineApi>>(const ServeOptions&)>;

// Returns the process exit code: 0 after a signal-initiated shutdown, 1 when binding or loading failed.
int run_server(const ServeOptions& options, const EngineFactory& factory);

}  // namespace tf
