// `gyre serve`'s flags for gyre/serve/options.h's options, declared once: the gyre tool's and
// gyre_serve_worker's (the same parser), their checks and the arguments the tool hands the
// worker. libtorch-free: the gyre tool links it without libtorch. docs/serving.md describes them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "gyre/serve/options.h"

namespace gyre::serve {

// The flags on `app` (the gyre tool's `serve` subcommand, or the worker's own); MODEL positional.
void addServeFlags(CLI::App& app, ServeOptions& o);
// Throws InvalidArgument naming the flag for a value out of its range.
void validateServeOptions(const ServeOptions& o);
// The arguments that give the worker the same options.
std::vector<std::string> serveWorkerArguments(const ServeOptions& o);
// With --replica-processes: the processes that host replicas (beside the server's own).
int replicaProcessCount(const ServeOptions& o);

}  // namespace gyre::serve
