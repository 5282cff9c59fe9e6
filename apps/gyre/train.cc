#include "train.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "data/data_root.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "launcher/agent.h"
#include "launcher/job.h"
#include "launcher/process.h"
#include "metrics/server.h"
#include "run_dir.h"
#include "train/checkpoint_rules.h"
#include "train/layout.h"
#include "train/options.h"  // the flags, shared with the worker (no libtorch)
#include "train/records.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTrainWorker = "gyre_train_worker";
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

// A run whose config.json names a straggler (--straggler-factor above 1) measured no one's real
// throughput.
bool slowedOnPurpose(const fs::path& runDir) {
  std::ifstream in(runDir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (!config.is_object()) return false;
  const nlohmann::json rank = config.value("straggler_rank", nlohmann::json(-1));
  const nlohmann::json factor = config.value("straggler_factor", nlohmann::json(1.0));
  return rank.is_number() && rank.get<double>() >= 0 && factor.is_number() && factor.get<double>() > 1;
}

// A single-worker run's throughput, from an earlier run directory.
struct Reference {
  double samplesPerS = 0;
  std::string dir;
};

// The earlier runs beside `runDir` (its siblings) whose metrics.jsonl says: one worker, not plain,
// the same model, global batch and threads (and with no straggler injected). The newest such file
// (by modification time) wins, and its last epoch's samples/s is the reference.
std::optional<Reference> findReference(const fs::path& runDir, const std::string& model, std::int64_t batch,
                                       int threads) {
  std::error_code ec;
  std::optional<Reference> best;
  fs::file_time_type bestTime;
  for (const fs::directory_entry& entry : fs::directory_iterator(runDir.parent_path(), ec)) {
    const fs::path metrics = entry.path() / "metrics.jsonl";
    if (entry.path() == runDir || !fs::is_regular_file(metrics, ec)) continue;
    std::ifstream in(metrics);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    std::optional<train::EpochRecord> e;
    try {
      e = train::parseEpochRecord(last);
    } catch (const Error&) {
      continue;  // not one of ours
    }
    if (!e || slowedOnPurpose(entry.path())) continue;
    if (e->world != 1 || e->plain || e->model != model || e->batch != batch || e->torchThreads != threads ||
        e->samplesPerS <= 0)  // an epoch recorded after a restart, not timed
      continue;
    const fs::file_time_type time = fs::last_write_time(metrics, ec);
    if (best && time <= bestTime) continue;
    best = Reference{e->samplesPerS, entry.path().string()};
    bestTime = time;
  }
  return best;
}

void requireData(const std::string& dir) {
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    const fs::path path = fs::path(dir) / name;
    std::error_code ec;
    if (fs::exists(path.string() + ".gz", ec) || fs::exists(path, ec)) continue;
    throw Error(
        "Fashion-MNIST not found in " + dir +
        (fs::is_directory(dir, ec) ? " (no " + path.filename().string() + ".gz)" : "") +
        ": install Debian's dataset-fashion-mnist package (sudo apt-get install dataset-fashion-mnist) "
        "or pass --data-dir");
  }
}

// A checkpoint directory that already holds a complete checkpoint (ckpt-<step>/manifest.json; see
// docs/checkpoints.md) is only for --resume: starting afresh there would mix two runs. Whether it
// is valid is for the worker to check.
void checkCheckpointDir(const train::TrainOptions& o) {
  if (o.checkpointDir.empty() || o.resume) return;
  const std::string newest = train::newestCompleteCheckpoint(o.checkpointDir);
  if (newest.empty()) return;
  GYRE_USAGE_ERROR(
      "--checkpoint-dir ", o.checkpointDir, " already holds checkpoints (",
      fs::path(newest).filename().string(),
      ", ...): pass --resume to continue from the newest valid one, or choose another directory");
}

int train(train::TrainOptions o) {
  train::validateOptions(o);
  train::checkWorld(o, o.np);
  // Worker 0 serves the metrics; a port in use stops us here, before anything starts.
  if (o.metricsPort > 0) metrics::checkPortFree("0.0.0.0", o.metricsPort, "--metrics-port");
  const std::string worker = (fs::path(launcher::selfExecutable()).parent_path() / kTrainWorker).string();
  if (::access(worker.c_str(), X_OK) != 0)
    throw Error("this gyre was built without the trainer: " + worker +
                " is missing (install libtorch-dev and libopenblas0-pthread, then configure and build again; "
                "see docs/training.md)");
  if (!o.checkpointDir.empty()) o.checkpointDir = fs::absolute(o.checkpointDir).string();
  checkCheckpointDir(o);
  train::checkResumeBeforeStart(o, o.np);  // another layout or model: refused before any worker starts
  if (o.data.empty()) {
    requireData(o.dataDir.empty() ? kDefaultDataDir : o.dataDir);
  } else {
    // The workers read the folders themselves; what is missing is said here, before they start.
    o.data = fs::absolute(o.data).string();
    gyre::data::detail::describeDataRoot(o.data);
  }

  const fs::path runDir = fs::absolute(o.runDir.empty() ? uniqueRunDir(fmt::format("{}-np{}", o.model, o.np))
                                                        : fs::path(o.runDir));
  std::error_code ec;
  fs::create_directories(runDir, ec);
  if (ec) throw Error("cannot create the run directory " + runDir.string() + ": " + ec.message());

  const int threads = o.threads > 0 ? o.threads : std::max(1, launcher::usableCores() / o.np);
  fmt::print(
      "gyre train: {} on {} worker{} ({} thread{}{}), global batch {} ({} per {}), lr {}, {} epoch{}\n",
      o.model, o.np, o.np == 1 ? "" : "s", threads, threads == 1 ? "" : "s", o.np == 1 ? "" : " each",
      o.batch, o.batch / (o.np / o.pp), o.pp > 1 ? "replica" : "worker", o.lr, o.epochs, o.epochs == 1 ? "" : "s");
  if (o.pp > 1)
    fmt::print("pipeline: {} replica{} of {} stages ({} balance), {} micro-batches per step, schedule {}{}\n",
               o.np / o.pp, o.np / o.pp == 1 ? "" : "s", o.pp, o.balance, train::microBatchesOf(o), o.schedule,
               o.recompute ? ", recomputing activations" : "");
  if (o.elastic)
    fmt::print("elastic: goes on with {} to {} workers, a commit every {} step{}{}\n", o.minNp,
               o.maxNp > 0 ? o.maxNp : o.np, o.commitEvery, o.commitEvery == 1 ? "" : "s",
               o.maxRestarts > 0 ? fmt::format(", up to {} replacement worker{}", o.maxRestarts,
                                               o.maxRestarts == 1 ? "" : "s")
                                 : "");
  const int servers = !train::isParameterServerMode(o.mode) ? 0 : o.servers > 0 ? o.servers : 1;
  if (servers > 0)
    fmt::print("parameter servers: {} ({}), momentum {} applied on the servers\n", servers, o.mode.substr(3),
               o.momentum);
  if (o.stragglerRank >= 0 && o.stragglerFactor > 1)
    fmt::print("straggler: rank {} runs {}x slower\n", o.stragglerRank, o.stragglerFactor);
  fmt::print("run directory: {}\n", runDir.string());
  if (o.referenceSamplesPerS == 0 && o.np > 1) {
    if (const auto ref = findReference(runDir, o.model, o.batch, threads)) {
      o.referenceSamplesPerS = ref->samplesPerS;
      fmt::print("speedup against 1 worker: {:.0f} samples/s in {}\n", ref->samplesPerS, ref->dir);
    } else {
      fmt::print(
          "no 1-worker run of {} with batch {} and {} thread{} beside it for speedup and efficiency: run "
          "`gyre train --model {} --np 1 --threads {} --batch {}` once\n",
          o.model, o.batch, threads, threads == 1 ? "" : "s", o.model, threads, o.batch);
    }
  }
  std::fflush(stdout);

  launcher::RunOptions run;
  run.np = o.np;
  run.tagOutput = false;
  run.threads = threads;
  run.timeoutS = o.timeoutS;
  // Every generation after the first resumes from the newest valid checkpoint: the workers see
  // GYRE_RESTART_COUNT > 0 and behave as with --resume. Elastic: the replacement workers.
  run.maxRestarts = o.maxRestarts;
  run.servers = servers;
  if (o.elastic) {
    // The workers see GYRE_ELASTIC=1 and train through gyre::elastic::run (docs/elastic.md).
    run.elastic = true;
    run.minNp = o.minNp;
    run.maxNp = o.maxNp > 0 ? o.maxNp : o.np;
    run.elasticTimeoutS = o.elasticTimeoutS;
    run.rdzv = o.rdzv;
    // One shard per worker of the full job: a smaller world computes each step's gradient as it does.
    if (o.batchShards == 0) o.batchShards = o.np;
  }
  // libgomp's threads otherwise spin while they wait, and with more than one thread per worker
  // they spin against OpenBLAS's and against anything else running: 3 to 25 times slower on a
  // busy 2-core machine. A value the user set wins.
  if (threads > 1 && std::getenv("OMP_WAIT_POLICY") == nullptr)
    run.exports.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  // Workers write to pipes: whether to draw is decided here, where the terminal is.
  if (o.progress == "auto") o.progress = ::isatty(STDERR_FILENO) ? "on" : "off";
  o.runDir = runDir.string();
  run.program = {worker};
  const std::vector<std::string> arguments = train::workerArguments(o);
  run.program.insert(run.program.end(), arguments.begin(), arguments.end());
  return launcher::runJob(run);
}

}  // namespace

void addTrain(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<train::TrainOptions>();
  o->model = "cnn";
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model on Fashion-MNIST with N local workers (data-parallel, on libtorch)");
  cmd->footer(
      "Trains the mlp, the cnn or the vit on Fashion-MNIST (Debian's dataset-fashion-mnist package) with N worker\n"
      "processes on this host. Every step trains on --batch samples in all, --batch / N on each worker,\n"
      "and the workers average their gradients, so N workers compute what one would, faster. Each\n"
      "epoch prints its loss, test accuracy, samples/s, speedup and efficiency against an earlier\n"
      "1-worker run (when the run directory's siblings hold one with the same model, batch and\n"
      "threads), and where a step's time went. The run directory (default runs/MODEL-npN-TIME) gets\n"
      "config.json, metrics.jsonl (one JSON object per epoch), steps.jsonl (each step's loss),\n"
      "progress.jsonl (each step as it ends) and model.pt. See docs/training.md.\n\n"
      "With --checkpoint-dir D, worker 0 saves a verified checkpoint into D every --checkpoint-every\n"
      "steps and at the end (written in the background; each save prints its size and the stall).\n"
      "--resume continues from the newest valid one: bit for bit with the same number of workers,\n"
      "and with another number too (the global batch stays the same). With --pp, --tp or --zero every\n"
      "worker saves its own part, resumed on the same layout; a --pp checkpoint also resumes on\n"
      "another number of workers or stages without --tp and --zero. Without --resume a D that\n"
      "holds checkpoints is refused. See docs/checkpoints.md.\n\n"
      "With --max-restarts K (and --checkpoint-dir), a worker that fails stops the others and every\n"
      "worker starts again, up to K times (gyre run's restarts); each new generation resumes from the\n"
      "newest valid checkpoint, as --resume does, so a failure costs at most the steps since it. See\n"
      "docs/fault-tolerance.md.\n\n"
      "With --elastic, a worker that fails does not stop the others: they roll back to their last\n"
      "commit (an in-memory copy of the model, optimizer and position, every --commit-every steps)\n"
      "and go on as a smaller world while at least --min-np remain (gyre run --elastic); with\n"
      "--max-restarts K, up to K replacement workers are started and join at the next commit. The\n"
      "global batch stays --batch whatever the world. No checkpoints in this mode (--checkpoint-dir,\n"
      "--resume and --stop-at-step are refused). See docs/elastic.md.\n\n"
      "With --mode ps:bsp|ps:asp|ps:ssp:S, the model lives on --servers S parameter servers started\n"
      "beside the workers (gyre run --servers S), which apply SGD with --momentum; each worker pushes\n"
      "its gradients and pulls the parameters: synchronously (bsp), asynchronously (asp) or at most S\n"
      "steps apart (ssp). metrics.jsonl then also holds each epoch's staleness. See docs/ps.md.\n\n"
      "Examples:\n"
      "  gyre train --model cnn --np 2 --epochs 3\n"
      "  gyre train --model mlp --np 1 --threads 1      # the 1-worker reference for --np 2 on 2 cores\n"
      "  gyre train --model mlp --np 2 --compression bf16 --json\n"
      "  gyre train --model cnn --np 2 --epochs 3 --checkpoint-dir ckpt --checkpoint-every 100\n"
      "  gyre train --model cnn --np 1 --epochs 3 --checkpoint-dir ckpt --resume   # after a failure\n"
      "  gyre train --model cnn --np 2 --checkpoint-dir ckpt --checkpoint-every 50 --max-restarts 3\n"
      "  gyre train --model cnn --np 2 --elastic --min-np 1 --commit-every 10 --max-restarts 1\n"
      "  gyre train --model mlp --np 2 --mode ps:asp --servers 2");
  // Every flag, its default, group and help come from the one table (src/train/options.cc).
  train::addTrainFlags(*cmd, *o, train::FlagScope::kLauncher);
  cmd->callback([o, cmd, &action] {
    action = [o, cmd] {
      train::validateOptions(*o);  // the values first: their messages are the worker's too
      train::checkGivenTogether(*cmd);
      return train(*o);
    };
  });
}

}  // namespace gyre::app
