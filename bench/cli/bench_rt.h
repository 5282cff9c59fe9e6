// `gyre bench rt`: the task and actor runtime (gyre::rt) measured as Ray's microbenchmarks are
// (single-client sync and async tasks, 1:1 sync and async actor calls, n:n actor calls): the
// processes of the runtime are Runtimes in this process, each with its own threads, listening on
// loopback, so every remote call crosses a real authenticated TCP connection with its arguments
// and result serialized. See docs/benchmarks.md, "gyre bench rt".
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace gyre::app {

// Adds the `rt` subcommand to `bench`. Exit codes: 0 when every measurement ran (whether or not a
// target was reached), 1 when one failed, 2 for bad flags.
void addBenchRt(CLI::App& bench, std::function<int()>& action);

}  // namespace gyre::app
