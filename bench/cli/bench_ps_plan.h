// `gyre bench ps` apart from running anything: its settings and their checks, the keys of the
// throughput model, the `gyre train` command line of each time-to-accuracy run, and how a run's
// eval.jsonl and metrics.jsonl become its figures (time to the target accuracy, samples/s, the
// staleness distribution). No processes, threads or sockets, so tests/unit/bench_ps_test.cc
// checks it on its own; bench_ps.cc runs the plan with bench_ps_throughput.h, bench_ps_launched.h
// and bench_ps_accuracy.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_trainer.h"  // AccuracyJob, RunRootFlags
#include "gyre/ps.h"
#include "train/records.h"

namespace gyre::app {

// --part: which of the two measurements run.
enum class PsBenchPart { kThroughput, kAccuracy, kAll };
PsBenchPart parsePsBenchPart(const std::string& text);  // throughput | accuracy | all
bool runsThroughput(PsBenchPart part);
bool runsAccuracy(PsBenchPart part);

// ---- part 1: throughput versus the number of servers ------------------------------------------

struct ThroughputSettings {
  std::vector<int> servers = {1, 2, 4};
  int workers = 2;
  std::uint64_t floats = 4u << 20;  // the model: float32 parameters over every key
  std::string mode = "asp";         // ps::Mode::parse
  double seconds = 3;               // timed seconds per point (when steps == 0)
  int steps = 0;                    // > 0: exactly this many timed steps per worker
  int warmup = 3;                   // untimed steps per worker before each point
  double timeoutS = 120;            // bounds every blocking parameter-server call
  bool replicate = true;            // ps::TableSpec::replicate (--no-replication: false)
};

// "4M" (4 * 2^20), "512K" (512 * 2^10), "1000". Throws InvalidArgument naming `flag`.
std::uint64_t parseSizeWithSuffix(const std::string& text, const std::string& flag);
// Throws InvalidArgument.
void validate(const ThroughputSettings& s);

// The keys of a model of `total` floats, of uneven sizes as a network's layers are: four weight
// matrices of 40%, 30%, 15% and 10%, two smaller tensors of 4% and 1%, and the remainder as a
// small last key (a bias). They sum to `total` exactly. Needs total >= 64.
std::vector<std::size_t> throughputKeySizes(std::uint64_t total);

// ---- part 2: time to accuracy ------------------------------------------------------------------

struct AccuracySettings : AccuracyJob {
  int np = 2;
  std::vector<std::string> modes = {"allreduce", "ps:bsp", "ps:asp", "ps:ssp:2"};
  int servers = 2;  // for the ps modes
  int stragglerRank = 1;
  double stragglerFactor = 2;      // 1: no straggler runs
  std::optional<double> lr;        // unset: gyre train's default
  std::optional<double> momentum;  // unset: gyre train's default
};

// "allreduce,ps:bsp,ps:asp,ps:ssp:2": allreduce and ps:<bsp|asp|ssp:S>, none twice. Throws
// InvalidArgument.
std::vector<std::string> parseTrainModes(const std::string& text);
bool isPsMode(const std::string& mode);
// Throws InvalidArgument.
void validate(const AccuracySettings& s);
bool hasStragglerRuns(const AccuracySettings& s);

struct AccuracyRun {
  std::string mode;
  bool straggler = false;
  // "ps:asp", "ps:asp straggler"
  std::string label() const;
  // A directory name: "ps-asp", "ps-ssp-2-straggler"
  std::string dirName() const;
};

// Every mode without the straggler, then (when hasStragglerRuns) every mode with it.
std::vector<AccuracyRun> planAccuracyRuns(const AccuracySettings& s);

// The arguments after the program name: {"train", "--model", ..., "--run-dir", runDir, ...}.
std::vector<std::string> trainArguments(const AccuracySettings& s, const AccuracyRun& run,
                                        const std::string& runDir);

// One line of a run's eval.jsonl (train/records.h).
using EvalPoint = train::EvalRecord;
// nullopt for a blank line; throws Error for anything else that is not such a record.
std::optional<EvalPoint> parseEvalLine(const std::string& line);

struct TimeToAccuracy {
  bool reached = false;  // some evaluation reached the target
  long step = 0;         // the first such evaluation's step and time
  double timeS = 0;
  double bestAcc = 0;
  double finalAcc = 0;  // the last evaluation's
  std::size_t evals = 0;
  long lastStep = 0;  // the last evaluation's step and time
  double lastTimeS = 0;
};
// The first evaluation (in file order) with test_acc >= target.
TimeToAccuracy timeToAccuracy(const std::vector<EvalPoint>& points, double target);

// Samples per second of training, evaluations left out: the global batch times rank 0's steps
// at its last evaluation over its time_s then (0 without evaluations). metrics.jsonl's samples/s
// counts the evaluations' pauses too. Under asp and ssp it is rank 0's pace, which a straggler
// elsewhere does not hold back.
double trainingSamplesPerS(const TimeToAccuracy& t, int globalBatch);

// Staleness counts by value, as ps::WorkerStats and metrics.jsonl hold them, summarized by
// ps::summarizeStaleness.
using ps::StalenessSummary;
using ps::summarizeStaleness;
// "0.42 / 0 / 2 / 5" (mean / p50 / p99 / max; a saturated max reads "64+"), "-" with no updates.
std::string stalenessText(const StalenessSummary& s);

// A run's metrics.jsonl together: its epochs' samples and seconds summed, their staleness counts
// added (per-epoch counts), clock waits summed; the last epoch's test accuracy.
struct RunTotals {
  double samplesPerS = 0;
  double seconds = 0;
  long steps = 0;
  std::optional<double> testAcc;
  bool hasStaleness = false;
  std::vector<std::uint64_t> staleness;
  double clockWaitS = 0;
  std::size_t epochs = 0;
};
// The epoch records of a run's metrics.jsonl together; other lines are skipped (train/records.h,
// parseEpochRecord); throws Error for a record with a mistyped field.
RunTotals parseMetricsLines(const std::vector<std::string>& lines);

// ---- the command line --------------------------------------------------------------------------

// `gyre bench ps`'s flags as given: lists as text, and which flags were given at all (some are
// refused under gyre run --servers, some left to gyre train when absent).
struct PsBenchFlags {
  std::string part = "all";
  bool json = false;
  // part 1
  ThroughputSettings throughput;
  std::string servers = "1,2,4";
  std::string floats = "4M";
  bool serversGiven = false, workersGiven = false;  // refused against the job's under gyre run --servers
  bool noReplication = false;
  // part 2
  AccuracySettings accuracy;
  std::string modes = "allreduce,ps:bsp,ps:asp,ps:ssp:2";
  double lr = 0, momentum = 0;  // set in `accuracy` only when given: otherwise gyre train's own
  RunRootFlags runs;
};

// Under `gyre run --servers S` only the throughput part runs: throws InvalidArgument for another
// --part.
void checkLaunchedPart(PsBenchPart part);
// Under `gyre run --servers S` (jobServers = S) the job fixes the servers and the workers: a
// --servers list, a --servers other than S or any --workers is refused rather than silently
// ignored (f.throughput.servers parsed already). Throws InvalidArgument.
void checkLaunchedFlags(const PsBenchFlags& f, int jobServers);

}  // namespace gyre::app
