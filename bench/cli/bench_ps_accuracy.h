// `gyre bench ps`, part 2: time to a test accuracy for allreduce and the parameter-server modes,
// with and without a straggler, as one `gyre train` (this same executable) after another, each in
// a run directory of its own and read back from its eval.jsonl and metrics.jsonl. See
// docs/benchmarks.md, `gyre bench ps`.
#pragma once

#include "bench_ps_plan.h"
#include "bench_ps_report.h"

namespace gyre::app {

// Runs every run of planAccuracyRuns(f.accuracy) (settings checked already) under f.runs.path (or a
// temporary directory), printing a row as each ends (or with f.json one object at the end), then
// the winners. Returns 0, or 1 when a run failed (its row says why; the run directories are
// kept). Throws RunFailed when interrupted (the caller installs the handlers).
int runAccuracyPart(const PsBenchFlags& f, const PsMachine& m);

}  // namespace gyre::app
