// What the benchmarks that train (gyre bench train, comm, parallel, ps) share: the trainer's
// worker beside the gyre tool, the checks before they start anything, and one training job run
// with its output in a log and its records read afterwards from its run directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench_child.h"
#include "train/options.h"

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

// A time-to-accuracy job as gyre bench comm and gyre bench ps's accuracy part run it with gyre
// train: the model, the run's length, the accuracy to reach, how often it is measured and how
// long a run may take. Each bench's settings extend it (and set their own defaults).
struct AccuracyJob {
  std::string model = "cnn";
  double target = 0.85;
  int epochs = 1;
  int maxSteps = 0;  // per epoch; 0: whole epochs
  int batch = 128;   // global
  int evalEvery = 50;
  int threads = 0;  // compute threads per worker; 0: gyre train's default
  int seed = 0;
  std::string lrSchedule = "constant";  // gyre train's --lr-schedule: constant or cosine
  double runTimeoutS = 900;
  std::string dataDir;  // empty: gyre train's default
};

// Its flags: --model, --target, --epochs, --max-steps, --batch, --eval-every, --threads, --seed,
// --lr-schedule, --data-dir, --run-timeout, with their defaults shown; returned to put them in a group.
std::vector<CLI::Option*> addAccuracyJobOptions(CLI::App& cmd, AccuracyJob& job);
// Throws InvalidArgument naming the flag.
void validate(const AccuracyJob& job);
// gyre train's options for one run of `job` whose records go to runDir, without a progress line.
train::TrainOptions trainOptionsOf(const AccuracyJob& job, const std::string& runDir);

}  // namespace gyre::app
