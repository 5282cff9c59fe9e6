#include "bench_trainer.h"

#include <unistd.h>

#include "bench_programs.h"
#include "common/check.h"
#include "common/config.h"
#include "gyre/init.h"
#include "launcher/process.h"

namespace gyre::app {

namespace fs = std::filesystem;

std::string trainWorkerBesideTool() {
  return besideTool("gyre_train_worker");
}

void requireTrainWorker(const std::string& bench, const std::string& alternative) {
  const std::string worker = trainWorkerBesideTool();
  GYRE_USAGE_CHECK(::access(worker.c_str(), X_OK) == 0, bench, " trains with ", worker,
                   ", which is missing: build gyre with libtorch (GYRE_WITH_TORCH, target gyre_train_worker)",
                   alternative);
}

void requireNoLauncher(const std::string& bench) {
  GYRE_USAGE_CHECK(detectLaunch(config::processEnvironment()).launcher == "none", bench,
                   " starts its own jobs: run it outside any launcher (gyre run, mpirun, srun, torchrun)");
}

ChildRun runTrainingJob(const std::string& name, const std::vector<std::string>& arguments,
                        const fs::path& dir, const std::string& log, double timeoutS) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run directory " + dir.string() + ": " + ec.message());
  for (const char* record : {"eval.jsonl", "metrics.jsonl"}) fs::remove(dir / record, ec);
  std::vector<std::string> argv = {launcher::selfExecutable()};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  return runLoggedChild(name, argv, dir / log, timeoutS);
}

std::vector<CLI::Option*> addAccuracyJobOptions(CLI::App& cmd, AccuracyJob& job) {
  std::vector<CLI::Option*> options = {
      cmd.add_option("--model", job.model, "mlp or cnn"),
      cmd.add_option("--target", job.target, "Test accuracy to reach"),
      cmd.add_option("--epochs", job.epochs, "Epochs of each run"),
      cmd.add_option("--max-steps", job.maxSteps, "Steps per epoch (0: the whole epoch)"),
      cmd.add_option("--batch", job.batch, "Global batch"),
      cmd.add_option("--eval-every", job.evalEvery, "Test accuracy every N steps"),
      cmd.add_option("--threads", job.threads, "Compute threads per worker (0: gyre train's default)"),
      cmd.add_option("--seed", job.seed, "Seed of every run"),
      cmd.add_option("--lr-schedule", job.lrSchedule,
                     "constant, or cosine (down to zero at the end: final accuracies less noisy)")
          ->check(CLI::IsMember({"constant", "cosine"})),
      cmd.add_option("--run-timeout", job.runTimeoutS, "Seconds a run may take before it is stopped (a failure row)")};
  for (CLI::Option* o : options) o->capture_default_str();
  options.push_back(cmd.add_option("--data-dir", job.dataDir, "Fashion-MNIST's IDX files (default: gyre train's)"));
  return options;
}

void validate(const AccuracyJob& job) {
  GYRE_USAGE_CHECK(job.model == "mlp" || job.model == "cnn", "--model '", job.model, "': expected mlp or cnn");
  GYRE_USAGE_CHECK(job.target > 0 && job.target <= 1, "--target is a test accuracy in (0, 1] (got ", job.target,
                   ")");
  GYRE_USAGE_CHECK(job.epochs >= 1, "--epochs must be at least 1 (got ", job.epochs, ")");
  GYRE_USAGE_CHECK(job.maxSteps >= 0, "--max-steps must not be negative (got ", job.maxSteps, ")");
  GYRE_USAGE_CHECK(job.batch >= 1, "--batch must be at least 1 (got ", job.batch, ")");
  GYRE_USAGE_CHECK(job.evalEvery >= 1, "--eval-every must be at least 1: the time to --target needs it (got ",
                   job.evalEvery, ")");
  GYRE_USAGE_CHECK(job.threads >= 0, "--threads must not be negative (got ", job.threads, ")");
  GYRE_USAGE_CHECK(job.runTimeoutS > 0, "--run-timeout must be positive (got ", job.runTimeoutS, ")");
}

train::TrainOptions trainOptionsOf(const AccuracyJob& job, const std::string& runDir) {
  train::TrainOptions o;
  o.model = job.model;
  o.epochs = job.epochs;
  o.maxSteps = job.maxSteps;
  o.batch = job.batch;
  o.seed = static_cast<std::uint64_t>(job.seed);
  o.lrSchedule = job.lrSchedule;
  o.threads = job.threads;
  o.evalEvery = job.evalEvery;
  o.dataDir = job.dataDir;
  o.runDir = runDir;
  o.progress = "off";
  return o;
}

}  // namespace gyre::app
