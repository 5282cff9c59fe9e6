#include "train.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gyre/errors.h"
#include "gyre/ps.h"
#include "launcher/agent.h"
#include "launcher/job.h"
#include "launcher/process.h"
#include "train/trainer.h"  // TrainOptions only (no libtorch): the defaults are the worker's
#include "usage_error.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWorker = "gyre_train_worker";
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

struct TrainFlags {
  train::TrainOptions o;
  int np = 1;
  int threads = 0;  // per worker; 0: cores / np
  bool noEval = false;
  double timeoutS = 0;
  int maxRestarts = 0;  // restart mode: restarts of every worker; elastic: replacement workers
  // --elastic: gyre run --elastic's bounds (docs/elastic.md). maxNp 0: np.
  bool elastic = false;
  int minNp = 1;
  int maxNp = 0;
  double elasticTimeoutS = 600;
  std::vector<std::string> elasticOnlyGiven;  // the elastic flags given, to refuse them without --elastic
  int servers = -1;  // --servers: parameter servers of a ps mode; -1: not given (1 with a ps mode)
};

// "ps:bsp", "ps:asp", "ps:ssp:S": true; "allreduce": false; anything else is refused.
bool parameterServerMode(const std::string& mode) {
  if (mode == "allreduce") return false;
  const bool ps = mode.rfind("ps:", 0) == 0;
  try {
    if (ps) ps::Mode::parse(mode.substr(3));
  } catch (const InvalidArgument&) {
    requireArg(false, "--mode '", mode, "': the parameter-server modes are ps:bsp, ps:asp and ps:ssp:S (S >= 0)");
  }
  requireArg(ps, "--mode '", mode, "': allreduce, or a parameter-server mode: ps:bsp, ps:asp or ps:ssp:S");
  return true;
}

// A ps mode trains through `gyre run --servers S`; the features that keep the model in the
// workers (checkpoints, elastic worlds) or change what travels (compression) do not apply yet.
void checkMode(const TrainFlags& f) {
  const train::TrainOptions& o = f.o;
  if (!parameterServerMode(o.mode)) {
    requireArg(f.servers < 0, "--servers ", f.servers, " needs a parameter-server --mode (ps:bsp, ps:asp or ps:ssp:S)");
    return;
  }
  requireArg(f.servers < 0 || f.servers >= 1, "--servers must be at least 1 (got ", f.servers, ")");
  requireArg(!f.elastic, "--mode ", o.mode, " cannot be combined with --elastic yet");
  requireArg(o.checkpointDir.empty() && !o.resume, "--mode ", o.mode,
             " keeps the parameters on the servers: checkpoints (--checkpoint-dir, --resume) are not supported with "
             "it yet");
  requireArg(o.compression == "none", "--mode ", o.mode, " pushes float32 gradients: --compression ", o.compression,
             " does not apply");
}

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
    const nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
    if (!j.is_object() || slowedOnPurpose(entry.path())) continue;
    try {
      if (j.at("world") != 1 || j.value("plain", false) || j.at("model") != model || j.at("batch") != batch ||
          j.at("torch_threads") != threads || !j.at("samples_per_s").is_number())
        continue;
      const fs::file_time_type time = fs::last_write_time(metrics, ec);
      if (best && time <= bestTime) continue;
      best = Reference{j.at("samples_per_s").get<double>(), entry.path().string()};
      bestTime = time;
    } catch (const nlohmann::json::exception&) {
      continue;  // not one of ours
    }
  }
  return best;
}

// runs/MODEL-npN-YYYYmmdd-HHMMSS, with -2, -3, ... when two runs start in the same second.
fs::path defaultRunDir(const std::string& model, int np) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const fs::path base = fs::path("runs") / fmt::format("{}-np{}-{}", model, np, stamp);
  fs::path dir = base;
  for (int n = 2; fs::exists(dir); ++n) dir = base.string() + "-" + std::to_string(n);
  return dir;
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

// --elastic keeps the training state in memory, committed every --commit-every steps; the
// checkpoint flags belong to restart mode (the worker refuses them as well).
void checkElastic(const TrainFlags& f) {
  const train::TrainOptions& o = f.o;
  const int maxNp = f.maxNp > 0 ? f.maxNp : f.np;
  for (const auto& [given, flag] : {std::pair{!o.checkpointDir.empty(), "--checkpoint-dir"},
                                    std::pair{o.resume, "--resume"}, std::pair{o.stopAtStep > 0, "--stop-at-step"}})
    requireArg(!given, "--elastic keeps its state in memory (a commit every --commit-every steps): ", flag,
               " belongs to restart mode and cannot be combined with it yet");
  requireArg(o.commitEvery >= 1, "--commit-every must be at least 1 (got ", o.commitEvery, ")");
  requireArg(f.minNp >= 1, "--min-np must be at least 1 (got ", f.minNp, ")");
  requireArg(f.maxNp >= 0, "--max-np must be at least 1 (got ", f.maxNp, ")");
  requireArg(f.minNp <= f.np && f.np <= maxNp, "--np ", f.np, " is outside --min-np ", f.minNp, " .. --max-np ",
             maxNp);
  requireArg(o.batch >= maxNp, "--batch ", o.batch, " is the global batch: it needs at least one sample for each of "
             "--max-np ", maxNp, " workers");
  requireArg(f.elasticTimeoutS > 0, "--elastic-timeout must be positive (got ", f.elasticTimeoutS, ")");
}

void check(const TrainFlags& f) {
  const train::TrainOptions& o = f.o;
  requireArg(f.np >= 1, "--np must be at least 1 (got ", f.np, ")");
  requireArg(f.elastic || f.elasticOnlyGiven.empty(), f.elasticOnlyGiven.empty() ? "" : f.elasticOnlyGiven[0],
             " needs --elastic");
  if (f.elastic) checkElastic(f);
  checkMode(f);
  requireArg(o.stragglerRank >= -1 && o.stragglerRank < f.np, "--straggler-rank ", o.stragglerRank,
             " is not a rank of the ", f.np, " workers (0 to ", f.np - 1, ", or -1 for none)");
  requireArg(o.stragglerFactor >= 1, "--straggler-factor must be at least 1 (got ", o.stragglerFactor, ")");
  requireArg(o.evalEvery >= 0, "--eval-every must not be negative (got ", o.evalEvery, ")");
  requireArg(o.epochs >= 1, "--epochs must be at least 1 (got ", o.epochs, ")");
  requireArg(o.batch >= 1, "--batch must be at least 1 (got ", o.batch, ")");
  // Elastic worlds need not divide the batch (each rank's loss is weighted by its share).
  requireArg(f.elastic || o.batch % f.np == 0, "--batch ", o.batch,
             " is the global batch and must divide evenly among the ", f.np,
             " workers: choose a multiple of ", f.np);
  requireArg(o.lr > 0, "--lr must be positive (got ", o.lr, ")");
  requireArg(o.momentum >= 0, "--momentum must not be negative (got ", o.momentum, ")");
  requireArg(o.warmupEpochs >= 0, "--warmup-epochs must not be negative (got ", o.warmupEpochs, ")");
  requireArg(o.maxSteps >= 0, "--max-steps must not be negative (got ", o.maxSteps, ")");
  requireArg(o.skipSteps >= 0, "--skip-steps must not be negative (got ", o.skipSteps, ")");
  requireArg(o.maxSteps == 0 || o.skipSteps < o.maxSteps, "--skip-steps ", o.skipSteps,
             " leaves none of the --max-steps ", o.maxSteps, " to time");
  requireArg(f.threads >= 0, "--threads must not be negative (got ", f.threads, ")");
  requireArg(o.bucketCapMb > 0, "--bucket-cap-mb must be positive (got ", o.bucketCapMb, ")");
  requireArg(!o.shardOptimizer || (!f.elastic && !parameterServerMode(o.mode)),
             "--shard-optimizer shards the data-parallel optimizer step: it does not apply with --elastic or --mode ",
             o.mode);
  requireArg(!o.shardOptimizer || (o.checkpointDir.empty() && !o.resume),
             "--shard-optimizer keeps each worker's part of the optimizer state on that worker: checkpoints "
             "(--checkpoint-dir, --resume) are not supported with it yet");
  requireArg(!o.shardOptimizer || o.compression == "none",
             "--shard-optimizer reduce-scatters float32 gradients: --compression ", o.compression, " does not apply");
  requireArg(o.referenceSamplesPerS >= 0, "--reference-samples-per-s must not be negative");
  requireArg(f.timeoutS >= 0, "--timeout must not be negative");
  requireArg(o.checkpointEvery >= 0, "--checkpoint-every must not be negative (got ", o.checkpointEvery, ")");
  requireArg(o.keepLast >= 1, "--keep-last must be at least 1 (got ", o.keepLast, ")");
  requireArg(o.stopAtStep >= 0, "--stop-at-step must not be negative (got ", o.stopAtStep, ")");
  requireArg(o.checkpointEvery == 0 || !o.checkpointDir.empty(),
             "--checkpoint-every needs --checkpoint-dir (where to save)");
  requireArg(!o.resume || !o.checkpointDir.empty(), "--resume needs --checkpoint-dir (where to resume from)");
  requireArg(f.maxRestarts >= 0, "--max-restarts must not be negative (0: no restarts)");
  requireArg(f.maxRestarts == 0 || f.elastic || !o.checkpointDir.empty(), "--max-restarts ", f.maxRestarts,
             " needs --checkpoint-dir: a restarted generation resumes from the newest checkpoint there, and "
             "without checkpoints it would start training over (or use --elastic, where it counts replacement "
             "workers)");
  requireArg(o.faultAtStep >= 0, "--fault-at-step must not be negative (got ", o.faultAtStep, ")");
  requireArg(o.faultRank >= 0 && o.faultRank < f.np, "--fault-rank ", o.faultRank, " is not a ",
             f.elastic ? "worker id" : "rank", " of the ", f.np, " workers (0 to ", f.np - 1, ")");
}

// A checkpoint directory that already holds a complete checkpoint (ckpt-<step>/manifest.json; see
// docs/checkpoints.md) is only for --resume: starting afresh there would mix two runs. Whether it
// is valid is for the worker to check.
void checkCheckpointDir(const train::TrainOptions& o) {
  if (o.checkpointDir.empty() || o.resume) return;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(o.checkpointDir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !fs::exists(entry.path() / "manifest.json", ec)) continue;
    usageError("--checkpoint-dir ", o.checkpointDir, " already holds checkpoints (", name,
               ", ...): pass --resume to continue from the newest valid one, or choose another directory");
  }
}

int train(const TrainFlags& f) {
  check(f);
  const std::string worker = (fs::path(launcher::selfExecutable()).parent_path() / kWorker).string();
  if (::access(worker.c_str(), X_OK) != 0)
    throw Error("this gyre was built without the trainer: " + worker +
                " is missing (install libtorch-dev and libopenblas0-pthread, then configure and build again; "
                "see docs/training.md)");
  train::TrainOptions o = f.o;
  o.eval = !f.noEval;
  if (!o.checkpointDir.empty()) o.checkpointDir = fs::absolute(o.checkpointDir).string();
  checkCheckpointDir(o);
  requireData(o.dataDir.empty() ? kDefaultDataDir : o.dataDir);

  const fs::path runDir = fs::absolute(o.runDir.empty() ? defaultRunDir(o.model, f.np) : fs::path(o.runDir));
  std::error_code ec;
  fs::create_directories(runDir, ec);
  if (ec) throw Error("cannot create the run directory " + runDir.string() + ": " + ec.message());

  const int threads = f.threads > 0 ? f.threads : std::max(1, launcher::usableCores() / f.np);
  fmt::print(
      "gyre train: {} on {} worker{} ({} thread{}{}), global batch {} ({} per worker), lr {}, {} epoch{}\n",
      o.model, f.np, f.np == 1 ? "" : "s", threads, threads == 1 ? "" : "s", f.np == 1 ? "" : " each",
      o.batch, o.batch / f.np, o.lr, o.epochs, o.epochs == 1 ? "" : "s");
  if (f.elastic)
    fmt::print("elastic: goes on with {} to {} workers, a commit every {} step{}{}\n", f.minNp,
               f.maxNp > 0 ? f.maxNp : f.np, o.commitEvery, o.commitEvery == 1 ? "" : "s",
               f.maxRestarts > 0 ? fmt::format(", up to {} replacement worker{}", f.maxRestarts,
                                               f.maxRestarts == 1 ? "" : "s")
                                 : "");
  const int servers = !parameterServerMode(o.mode) ? 0 : f.servers > 0 ? f.servers : 1;
  if (servers > 0)
    fmt::print("parameter servers: {} ({}), momentum {} applied on the servers\n", servers, o.mode.substr(3),
               o.momentum);
  if (o.stragglerRank >= 0 && o.stragglerFactor > 1)
    fmt::print("straggler: rank {} runs {}x slower\n", o.stragglerRank, o.stragglerFactor);
  fmt::print("run directory: {}\n", runDir.string());
  if (o.referenceSamplesPerS == 0 && f.np > 1) {
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
  run.np = f.np;
  run.tagOutput = false;
  run.threads = threads;
  run.timeoutS = f.timeoutS;
  // Every generation after the first resumes from the newest valid checkpoint: the workers see
  // GYRE_RESTART_COUNT > 0 and behave as with --resume. Elastic: the replacement workers.
  run.maxRestarts = f.maxRestarts;
  run.servers = servers;
  if (f.elastic) {
    // The workers see GYRE_ELASTIC=1 and train through gyre::elastic::run (docs/elastic.md).
    run.elastic = true;
    run.minNp = f.minNp;
    run.maxNp = f.maxNp > 0 ? f.maxNp : f.np;
    run.elasticTimeoutS = f.elasticTimeoutS;
  }
  // libgomp's threads otherwise spin while they wait, and with more than one thread per worker
  // they spin against OpenBLAS's and against anything else running: 3 to 25 times slower on a
  // busy 2-core machine. A value the user set wins.
  if (threads > 1 && std::getenv("OMP_WAIT_POLICY") == nullptr)
    run.exports.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  std::vector<std::string>& argv = run.program;
  auto flag = [&argv](const char* name, const std::string& value) { argv.insert(argv.end(), {name, value}); };
  auto number = [](double value) { return fmt::format("{}", value); };
  argv = {worker};
  flag("--model", o.model);
  flag("--epochs", std::to_string(o.epochs));
  flag("--batch", std::to_string(o.batch));
  flag("--lr", number(o.lr));
  flag("--momentum", number(o.momentum));
  flag("--compression", o.compression);
  flag("--lr-scaling", o.lrScaling);
  flag("--warmup-epochs", number(o.warmupEpochs));
  flag("--lr-schedule", o.lrSchedule);
  flag("--seed", std::to_string(o.seed));
  flag("--bucket-cap-mb", number(o.bucketCapMb));
  if (o.shardOptimizer) argv.push_back("--shard-optimizer");
  flag("--max-steps", std::to_string(o.maxSteps));
  flag("--skip-steps", std::to_string(o.skipSteps));
  flag("--run-dir", runDir.string());
  // Workers write to pipes: whether to draw is decided here, where the terminal is.
  flag("--progress", o.progress == "auto" ? (::isatty(STDERR_FILENO) ? "on" : "off") : o.progress);
  if (!o.dataDir.empty()) flag("--data-dir", o.dataDir);
  if (!o.eval) argv.push_back("--no-eval");
  if (o.json) argv.push_back("--json");
  if (o.referenceSamplesPerS > 0) flag("--reference-samples-per-s", number(o.referenceSamplesPerS));
  if (!o.checkpointDir.empty()) {
    flag("--checkpoint-dir", o.checkpointDir);
    flag("--checkpoint-every", std::to_string(o.checkpointEvery));
    flag("--keep-last", std::to_string(o.keepLast));
  }
  if (o.resume) argv.push_back("--resume");
  if (o.stopAtStep > 0) flag("--stop-at-step", std::to_string(o.stopAtStep));
  if (o.faultAtStep > 0) {
    flag("--fault-at-step", std::to_string(o.faultAtStep));
    flag("--fault-rank", std::to_string(o.faultRank));
  }
  if (f.elastic) flag("--commit-every", std::to_string(o.commitEvery));
  if (o.mode != "allreduce") flag("--mode", o.mode);
  if (o.stragglerRank >= 0) {
    flag("--straggler-rank", std::to_string(o.stragglerRank));
    flag("--straggler-factor", number(o.stragglerFactor));
  }
  if (o.evalEvery > 0) flag("--eval-every", std::to_string(o.evalEvery));
  return launcher::runJob(run);
}

}  // namespace

void addTrain(CLI::App& app, std::function<int()>& action) {
  auto f = std::make_shared<TrainFlags>();
  f->o.model = "cnn";
  train::TrainOptions& o = f->o;
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model on Fashion-MNIST with N local workers (data-parallel, on libtorch)");
  cmd->footer(
      "Trains the mlp or the cnn on Fashion-MNIST (Debian's dataset-fashion-mnist package) with N worker\n"
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
      "and with another number too (the global batch stays the same). Without --resume a D that\n"
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
  cmd->add_option("--model", o.model, "mlp or cnn")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  cmd->add_option("--np", f->np, "Number of workers (also -np)")->capture_default_str();
  cmd->add_option("--epochs", o.epochs, "Passes over the 60,000 training images")->capture_default_str();
  cmd->add_option("--batch", o.batch, "Global batch: samples per step over all workers (a multiple of --np)")
      ->capture_default_str();
  cmd->add_option("--lr", o.lr,
                  "SGD learning rate; right as it is for any --np, since the global batch is fixed")
      ->capture_default_str();
  cmd->add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--compression", o.compression,
                  "Gradients on the wire: none, fp16 or bf16 (half the bytes)")
      ->check(CLI::IsMember({"none", "fp16", "half", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--lr-scaling", o.lrScaling,
                  "Multiply --lr by 1 (none), by N (linear) or by sqrt(N): for a batch that grows with N")
      ->check(CLI::IsMember({"none", "linear", "sqrt"}))
      ->capture_default_str();
  cmd->add_option("--warmup-epochs", o.warmupEpochs, "Raise the learning rate linearly over this many epochs")
      ->capture_default_str();
  cmd->add_option("--lr-schedule", o.lrSchedule,
                  "After the warm-up: constant, or cosine (down to zero at the end of the last epoch)")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the initial weights and the samples' order")
      ->capture_default_str();
  cmd->add_option("--data-dir", o.dataDir, "Fashion-MNIST's IDX files")->default_str(kDefaultDataDir);
  cmd->add_option("--run-dir", o.runDir, "Where to write the run's files (default: runs/MODEL-npN-TIME)");
  cmd->add_option("--threads", f->threads, "Compute threads per worker (default: cores / N)");
  cmd->add_option("--max-steps", o.maxSteps, "Stop each epoch after this many steps (0: the whole epoch)")
      ->capture_default_str();
  cmd->add_option("--skip-steps", o.skipSteps, "Leave epoch 1's first steps out of samples/s (warm-up)")
      ->capture_default_str();
  cmd->add_flag("--no-eval", f->noEval, "Skip the test accuracy after each epoch");
  cmd->add_option("--bucket-cap-mb", o.bucketCapMb, "Gradients allreduced together, in MiB")
      ->capture_default_str();
  cmd->add_flag("--shard-optimizer", o.shardOptimizer,
                "Shard the optimizer step and its state across the workers (ZeRO stage 1): reduce-scatter, "
                "step 1/N of the parameters, allgather");
  cmd->add_flag("--json", o.json, "Also print each epoch's metrics as one JSON line");
  cmd->add_option("--progress", o.progress, "Live progress bar: auto (on a terminal), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--reference-samples-per-s", o.referenceSamplesPerS,
                  "One worker's samples/s for speedup and efficiency (default: found in earlier runs)");
  cmd->add_option("--timeout", f->timeoutS, "Stop the job after this many seconds (0: never)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", o.checkpointDir,
                  "Save checkpoints here (worker 0), each in D/ckpt-STEP with a verified manifest");
  cmd->add_option("--checkpoint-every", o.checkpointEvery,
                  "Save a checkpoint every N global steps, and at the end (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--keep-last", o.keepLast, "Checkpoints kept in --checkpoint-dir; older ones are deleted")
      ->capture_default_str();
  cmd->add_flag("--resume", o.resume,
                "Continue from the newest valid checkpoint in --checkpoint-dir (from scratch if none)");
  cmd->add_option("--stop-at-step", o.stopAtStep,
                  "Stop after this global step as if interrupted, saving a checkpoint (0: never)")
      ->capture_default_str();
  cmd->add_option("--max-restarts", f->maxRestarts,
                  "After a worker fails, restart every worker from the newest checkpoint, at most this many "
                  "times (needs --checkpoint-dir); with --elastic, the most replacement workers started")
      ->capture_default_str();
  const std::string elastic = "Elastic training (docs/elastic.md)";
  cmd->add_flag("--elastic", f->elastic,
                "Survive lost workers without restarting: the others roll back to their last commit and go on "
                "(gyre run --elastic)")
      ->group(elastic);
  std::vector<CLI::Option*> elasticOnly;
  elasticOnly.push_back(cmd->add_option("--min-np", f->minNp,
                                        "The fewest workers the job goes on with; below, it waits up to "
                                        "--elastic-timeout for more")
                            ->capture_default_str()
                            ->group(elastic));
  elasticOnly.push_back(
      cmd->add_option("--max-np", f->maxNp, "The most workers the job grows to (default: --np)")->group(elastic));
  elasticOnly.push_back(cmd->add_option("--elastic-timeout", f->elasticTimeoutS,
                                        "Seconds the job may stay below --min-np before it gives up")
                            ->capture_default_str()
                            ->group(elastic));
  elasticOnly.push_back(cmd->add_option("--commit-every", o.commitEvery,
                                        "Commit the training state in memory every N global steps: a lost "
                                        "worker costs the others at most N steps")
                            ->capture_default_str()
                            ->group(elastic));
  const std::string psGroup = "Parameter servers (docs/ps.md)";
  cmd->add_option("--mode", o.mode,
                  "How gradients meet: allreduce, or through parameter servers: ps:bsp (synchronous), ps:asp "
                  "(asynchronous) or ps:ssp:S (at most S steps apart)")
      ->capture_default_str()
      ->group(psGroup);
  cmd->add_option("--servers", f->servers, "Parameter server processes for a ps --mode (default 1)")
      ->group(psGroup);
  const std::string bench = "Benchmarking";
  cmd->add_option("--straggler-rank", o.stragglerRank,
                  "This rank runs --straggler-factor times slower: it sleeps that much longer than it computes "
                  "(-1: none)")
      ->capture_default_str()
      ->group(bench);
  cmd->add_option("--straggler-factor", o.stragglerFactor, "How many times slower the straggler runs")
      ->capture_default_str()
      ->group(bench);
  cmd->add_option("--eval-every", o.evalEvery,
                  "Worker 0 snapshots its model every N steps and, after training, writes each snapshot's "
                  "test accuracy and training time to eval.jsonl (0: never), for time-to-accuracy")
      ->capture_default_str()
      ->group(bench);
  const std::string testing = "Fault injection (testing; see docs/fault-tolerance.md)";
  cmd->add_option("--fault-at-step", o.faultAtStep,
                  "In the first generation, rank --fault-rank (elastic: worker id) kills itself with SIGKILL "
                  "right after this global step (0: never)")
      ->capture_default_str()
      ->group(testing);
  cmd->add_option("--fault-rank", o.faultRank, "The rank (elastic: the worker id) --fault-at-step kills")
      ->capture_default_str()
      ->group(testing);
  cmd->callback([f, elasticOnly, &action] {
    for (const CLI::Option* option : elasticOnly)
      if (option->count() > 0) f->elasticOnlyGiven.push_back(option->get_name());
    action = [f] { return train(*f); };
  });
}

}  // namespace gyre::app
