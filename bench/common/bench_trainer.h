// What the benchmarks that train (gyre bench train, comm, parallel, ps) share: the trainer's
// worker beside the gyre tool, the checks before they start anything, and one training job run
// with its output in a log and its records read afterwards from its run directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench_child.h"

namespace gyre::app {

// gyre_train_worker, beside this gyre tool (gyre train finds it there too).
std::string trainWorkerBesideTool();

// Throws InvalidArgument when this build has no gyre_train_worker: "`bench` trains with WORKER,
// which is missing: build gyre with libtorch (GYRE_WITH_TORCH, target gyre_train_worker)" and
// `alternative` (", or pass --part throughput").
void requireTrainWorker(const std::string& bench, const std::string& alternative = "");

// Throws InvalidArgument when a launcher (gyre run, mpirun, srun, torchrun) started this process:
// a bench that starts its own jobs would start them inside another's.
void requireNoLauncher(const std::string& bench);

// One job of a bench: makes `dir`, removes the records an earlier run left there (eval.jsonl,
// metrics.jsonl: they must not pass for this run's figures) and runs the gyre tool with
// `arguments` (`run ... -- WORKER ...` or `train ...`), its output in dir/`log`, for at most
// timeoutS seconds (runLoggedChild). Throws Error when `dir` cannot be made.
ChildRun runTrainingJob(const std::string& name, const std::vector<std::string>& arguments,
                        const std::filesystem::path& dir, const std::string& log, double timeoutS);

}  // namespace gyre::app
