// The engine the `serve` command runs: ServeOptions -> runtime::Engine.
#pragma once
#include "server/serve_run.h"

namespace tf::cli {
EngineFactory engine_factory();
}
