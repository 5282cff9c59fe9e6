// `gyre bench train` apart from running anything: which configurations run for a model, how the
// JSON lines of one run become its figures, how repeats become one figure, and the throughput
// goals (docs/benchmarks.md) computed from those figures. No libtorch and no processes, so the unit
// tests check it on its own (tests/unit/bench_train_test.cc); bench_train.cc runs the plan with
// bench_train_run.h.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/records.h"

namespace gyre::app {

// Fashion-MNIST's training set: an epoch has at most kTrainSamples / global batch steps.
inline constexpr int kTrainSamples = 60000;

enum class TrainRunner {
  kPlain,  // gyre_train_worker --plain: the project's single-process libtorch loop, no gyre
  kGyre,   // gyre_train_worker: one process (world of one) or W under `gyre run`
  kDdp,    // PyTorch DDP, gloo backend, W processes (gyre_ddp_train.py)
};
const char* toString(TrainRunner runner);

// Per process: libtorch's intra-op threads and OpenBLAS's threads (OPENBLAS_NUM_THREADS).
struct ThreadPair {
  int torch = 1;
  int blas = 1;
  bool operator==(const ThreadPair&) const = default;
};

struct TrainConfig {
  std::string model;
  TrainRunner runner = TrainRunner::kPlain;
  int world = 1;
  int globalBatch = 128;  // samples per step over all processes
  ThreadPair threads;     // of each process
  // A plain loop at the per-worker batch of W workers: the reference of E(W), with world 1; with
  // world W, W of them side by side (under `gyre run`, nothing exchanged): the most W workers
  // can reach on this machine, E(W)'s ceiling.
  int referenceFor = 0;
  int steps = 0;  // steps run (global steps: each of W workers runs as many at globalBatch / W)
  int skip = 0;   // the first `skip` of them are not timed

  int batchPerProcess() const { return globalBatch / world; }
  // "plain", "plain ref E(2)", "plain ref E(2) x2", "gyre", "ddp gloo"
  std::string label() const;
};

struct TrainBenchSettings {
  std::vector<std::string> models = {"mlp", "cnn"};
  std::vector<int> worlds = {1, 2};
  int globalBatch = 128;
  int steps = 0;  // 0: defaultSteps(model)
  int skip = 5;
  std::vector<ThreadPair> plainThreads = {{1, 1}, {1, 2}, {2, 2}};
  bool ddp = false;
};

// "1,2" -> {1, 2}. Throws InvalidArgument unless every entry is an integer in [1, 64] and none
// repeats.
std::vector<int> parseWorldList(const std::string& text);
// "mlp,cnn" -> {"mlp", "cnn"}; only mlp and cnn, no repeats. Throws InvalidArgument.
std::vector<std::string> parseModelList(const std::string& text);
// "default" -> 1:1,1:2,2:2; otherwise TORCH:BLAS pairs ("1:1,2:2"), each in [1, 64].
// Throws InvalidArgument.
std::vector<ThreadPair> parseThreadsGrid(const std::string& text);
// Steps that make each configuration run for several seconds on a 2-core machine.
int defaultSteps(const std::string& model);
// Checks what does not depend on the model (batch divisible by every world, skip < steps, ...).
// Throws InvalidArgument.
void validate(const TrainBenchSettings& s);

// The command line of `gyre bench train` as given: lists as text, checked by trainSettingsFrom.
struct TrainBenchFlags {
  std::string models = "mlp,cnn";
  std::string np = "1,2";
  int batch = 128;
  int steps = 0;
  int skip = 5;
  int repeat = 1;
  std::string pick = "best";
  bool json = false;
  std::string baseline = "none";
  std::string threadsGrid = "default";
  double lr = 0.05;
  double momentum = 0.9;
  int seed = 0;
  std::string compression = "none";
  bool shardOptimizer = false;
  std::string dataDir;
  std::string worker;  // gyre_train_worker; empty: next to gyre
  std::string python;  // empty: python3 on PATH, then /usr/bin/python3 (Debian's python3-torch)
  double timeoutS = 600;
};

// The settings the flags ask for, checked (validate, then --repeat and --timeout). Throws
// InvalidArgument.
TrainBenchSettings trainSettingsFrom(const TrainBenchFlags& f);

// The configurations for one model, in the order they run: the plain loop over the thread grid
// at the global batch; for every world W > 1, the plain loop at batch B/W with 1:1 threads (the
// E(W) reference), then W of them side by side (E(W)'s ceiling); gyre at every world with 1:1
// threads per worker; with ddp, DDP at every W > 1.
std::vector<TrainConfig> planModel(const TrainBenchSettings& s, const std::string& model);

// How a number of global steps becomes the worker's --epochs and --max-steps (steps per epoch),
// since an epoch has at most kTrainSamples / globalBatch of them: as few epochs as fit, with the
// steps spread evenly (the total may round up by less than one step per epoch).
struct EpochSplit {
  int epochs = 1;
  int stepsPerEpoch = 0;
};
EpochSplit splitSteps(int steps, int globalBatch);

// The programs the runs start, found before any runs (bench_train_run.h).
struct TrainPrograms {
  std::string self;        // this gyre tool: `gyre run` for gyre above one worker
  std::string worker;      // gyre_train_worker
  std::string python;      // python3 with torch and gloo, for the DDP runs
  std::string ddpScript;   // gyre_ddp_train.py, for the DDP runs
  std::string ddpSkipped;  // why --baseline ddp runs nothing: "skipped: no python3 with torch ..."
};

// The command line of one run of `c` (argv[0] first): the worker alone (the plain loop, gyre on
// one worker), under `gyre run --np W` (gyre above one worker, W plain loops side by side, each
// at batch B/W) or the DDP script under python3;
// each with the model, steps, batch, optimizer, seed and torch threads, and the worker's with the
// untimed steps, --json and no evaluations.
std::vector<std::string> trainRunArgv(const TrainConfig& c, const TrainBenchFlags& f, const TrainPrograms& p);

// The variables that set a process's threads (docs/benchmarks.md, "Threads"): OPENBLAS_NUM_THREADS,
// OMP_NUM_THREADS, MKL_NUM_THREADS and GYRE_NUM_THREADS.
std::vector<std::pair<std::string, std::string>> threadEnvironment(const ThreadPair& t);

// What one run reports: one epoch, or (combineEpochs) a whole run.
struct RunFigures {
 public:
  double samplesPerS = 0;
  double seconds = 0;  // timed seconds
  long steps = 0;      // timed steps
  // The step-time split (seconds); absent for DDP, which does not report one.
  bool hasSplit = false;
  double computeS = 0;
  double communicateS = 0;
  double waitS = 0;
  double hiddenS = 0;
  int torchThreads = 0;  // as the process saw them; 0: not reported
  int blasThreads = 0;
  double loss = 0;

  double stepMs() const { return steps > 0 ? 1000.0 * seconds / static_cast<double>(steps) : 0; }
  // Shares of the step time, as `gyre train` prints them (gyre/torch/step_timing.h): a step is
  // compute + wait; communicate runs beside it, wait is the part of it the step blocked on and
  // hidden = communicate - wait the part that overlapped the backward pass.
  double stepSeconds() const { return computeS + waitS > 0 ? computeS + waitS : seconds; }
  double computeShare() const { return share(computeS); }
  double communicateShare() const { return share(communicateS); }
  double waitShare() const { return share(waitS); }
  double hiddenShare() const { return share(hiddenS); }

 private:
  double share(double part) const { return stepSeconds() > 0 ? part / stepSeconds() : 0; }
};

// One line a run printed: its epoch's figures when the line is an epoch record (train/records.h:
// gyre train's --json, the DDP baseline's lines); nullopt for any other line. Throws Error for a
// record with a mistyped field.
std::optional<RunFigures> parseEpochLine(const std::string& line);
// The figures of an epoch record.
RunFigures figuresOf(const train::EpochRecord& epoch);

// A run's epochs together: samples and times summed, samples/s = samples / seconds, threads and
// loss from the last epoch.
RunFigures combineEpochs(const std::vector<RunFigures>& epochs);

enum class Pick { kBest, kMedian };
Pick parsePick(const std::string& name);  // "best" | "median"; throws InvalidArgument
const char* toString(Pick pick);
// The index of the run kept from several repeats of one configuration: the highest samples/s,
// or the median run (for an even count, the slower of the two middle runs).
std::size_t pickRun(const std::vector<RunFigures>& runs, Pick pick);

struct ConfigResult {
  TrainConfig config;
  RunFigures figures;                  // of the run kept
  std::vector<double> runSamplesPerS;  // every repeat, in the order they ran
};

// The result of `c` from its repeats: the run `pick` keeps, and every run's samples/s.
ConfigResult resultOf(const TrainConfig& c, const std::vector<RunFigures>& runs, Pick pick);

// One throughput goal, or a figure printed for information (threshold absent).
struct TargetCheck {
  std::string model;
  std::string name;        // "1 worker overhead", "E(2)", "2 workers / best plain", ...
  std::string definition;  // how it was computed, with the figures used
  std::optional<double> measured;
  std::optional<double> threshold;
  bool atMost = false;  // the target is measured <= threshold (overhead), else >=
  std::string skipped;  // why it could not be measured, when it could not

  // "PASS", "MISS", "SKIP" (not measured) or "info" (no threshold).
  std::string status() const;
};

// The targets for one model, from that model's results. DDP targets are listed (as SKIP) only
// when `ddpRequested`; `ddpSkipReason` says why there is no DDP result when one was requested.
std::vector<TargetCheck> evaluateTargets(const std::string& model, const std::vector<ConfigResult>& results,
                                         bool ddpRequested, const std::string& ddpSkipReason);

}  // namespace gyre::app
