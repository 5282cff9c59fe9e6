// gyre_train_worker: one worker of `gyre train`. `gyre train` starts N of them through the launcher
// (which sets GYRE_RANK, GYRE_WORLD_SIZE, ... for gyre::init()); run alone it is a world of one,
// and with --plain it trains in this process without gyre at all (the benchmarks' plain loop).
// The flags are a contract shared with `gyre train` and `gyre bench train`. In a generation that
// the launcher restarted (GYRE_RESTART_COUNT > 0, `gyre train --max-restarts`) it behaves as with
// --resume when it has a --checkpoint-dir.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "train/trainer.h"

namespace {

// GYRE_RESTART_COUNT (docs/configuration.md), set by gyre run in every worker; 0 when unset.
int restartCount() {
  return static_cast<int>(
      gyre::config::getOptionalInt(gyre::processEnvironment(), "GYRE_RESTART_COUNT").value_or(0));
}

// GYRE_RANK, for the one warning only rank 0 prints; 0 when unset (a world of one).
std::int64_t rankFromEnvironment() {
  return gyre::config::getOptionalInt(gyre::processEnvironment(), "GYRE_RANK").value_or(0);
}

}  // namespace

int main(int argc, char** argv) {
  gyre::train::TrainOptions o;
  CLI::App app{
      "gyre_train_worker: one worker of `gyre train` (Fashion-MNIST on libtorch); see docs/training.md"};
  app.add_option("--model", o.model, "mlp or cnn")
      ->check(CLI::IsMember({"mlp", "cnn"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "Passes over the training set")->capture_default_str();
  app.add_option("--batch", o.batch, "Global batch, split evenly among the workers")->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate (before --lr-scaling)")->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--compression", o.compression, "Gradients on the wire: none, fp16 or bf16")
      ->check(CLI::IsMember({"none", "fp16", "half", "bf16"}))
      ->capture_default_str();
  app.add_option("--lr-scaling", o.lrScaling, "Learning rate x 1, x workers or x sqrt(workers)")
      ->check(CLI::IsMember({"none", "linear", "sqrt"}))
      ->capture_default_str();
  app.add_option("--warmup-epochs", o.warmupEpochs, "Linear learning-rate warm-up, in epochs")
      ->capture_default_str();
  app.add_option("--lr-schedule", o.lrSchedule, "After the warm-up: constant, or cosine down to zero")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the initial weights and the samples' order")
      ->capture_default_str();
  app.add_option("--data-dir", o.dataDir,
                 "Fashion-MNIST's IDX files (default: /usr/share/datasets/fashion-mnist)");
  app.add_option("--run-dir", o.runDir, "Write config.json, metrics.jsonl and model.pt here (rank 0)");
  app.add_flag("--plain", o.plain, "No gyre: a plain single-process libtorch loop");
  app.add_option("--max-steps", o.maxSteps, "Stop each epoch after this many steps (0: all)")
      ->capture_default_str();
  app.add_option("--skip-steps", o.skipSteps, "Leave epoch 1's first steps out of the throughput")
      ->capture_default_str();
  bool noEval = false;
  app.add_flag("--no-eval", noEval, "Skip the test-set accuracy");
  app.add_option("--threads", o.threads, "libtorch threads (default: GYRE_NUM_THREADS, else 1)");
  app.add_option("--bucket-cap-mb", o.bucketCapMb, "Gradient bucket size, MiB")->capture_default_str();
  app.add_flag("--shard-optimizer", o.shardOptimizer,
               "Shard the optimizer step and state across the workers (ZeRO stage 1)");
  app.add_flag("--json", o.json, "Also print each epoch's metrics as a JSON line");
  app.add_option("--progress", o.progress, "Progress bar: auto (when stderr is a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_option("--reference-samples-per-s", o.referenceSamplesPerS,
                 "One worker's samples/s, for speedup and efficiency");
  app.add_option("--checkpoint-dir", o.checkpointDir,
                 "Save checkpoints here (rank 0); see docs/checkpoints.md");
  app.add_option("--checkpoint-every", o.checkpointEvery, "Save every N global steps (0: only at the end)")
      ->capture_default_str();
  app.add_option("--keep-last", o.keepLast, "Checkpoints kept")->capture_default_str();
  app.add_flag("--resume", o.resume, "Continue from the newest valid checkpoint in --checkpoint-dir");
  app.add_option("--stop-at-step", o.stopAtStep, "Stop after this global step as if interrupted (0: never)")
      ->capture_default_str();
  app.add_option(
         "--fault-at-step", o.faultAtStep,
         "Testing: in generation 0, rank --fault-rank kills itself (SIGKILL) after this step (0: never)")
      ->capture_default_str();
  app.add_option("--fault-rank", o.faultRank, "The rank (elastic: the worker id) that --fault-at-step kills")
      ->capture_default_str();
  app.add_option("--commit-every", o.commitEvery,
                 "Elastic (under gyre run --elastic): commit the state in memory every N global steps")
      ->capture_default_str();
  app.add_option("--mode", o.mode,
                 "allreduce, or through the parameter servers of gyre run --servers S: ps:bsp, ps:asp or "
                 "ps:ssp:S")
      ->capture_default_str();
  app.add_option("--straggler-rank", o.stragglerRank,
                 "Benchmarks: this rank runs --straggler-factor times slower (-1: none)")
      ->capture_default_str();
  app.add_option("--straggler-factor", o.stragglerFactor, "How many times slower the straggler runs")
      ->capture_default_str();
  app.add_option("--eval-every", o.evalEvery,
                 "Rank 0 snapshots its model every N global steps and writes the snapshots' test accuracies "
                 "to eval.jsonl after training (0: never)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.eval = !noEval;
  // A restarted generation (gyre run --max-restarts, which `gyre train --max-restarts` uses)
  // continues from the newest valid checkpoint, as --resume does; without a checkpoint directory
  // there is nothing to continue from and training starts over.
  try {
    o.restartCount = restartCount();
    // Under `gyre run --elastic`: train through gyre::elastic::run, as worker GYRE_ELASTIC_ID.
    const auto env = gyre::processEnvironment();
    o.elastic = gyre::config::getBool(env, "GYRE_ELASTIC");
    if (o.elastic) o.workerId = static_cast<int>(gyre::config::getOptionalInt(env, "GYRE_ELASTIC_ID").value_or(-1));
    if (o.restartCount > 0 && !o.checkpointDir.empty()) o.resume = true;
    if (o.restartCount > 0 && o.checkpointDir.empty() && rankFromEnvironment() == 0)
      std::fprintf(
          stderr,
          "gyre train: warning: restart %d without --checkpoint-dir: training starts over from step 0\n",
          o.restartCount);
  } catch (const gyre::InvalidArgument& e) {
    std::fprintf(stderr, "gyre train: error: %s\n", e.what());
    return 2;
  }
  try {
    gyre::train::runTraining(o);
    return 0;
  } catch (const gyre::InvalidArgument& e) {
    std::fprintf(stderr, "gyre train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre train: error: %s\n", e.what());
    return 1;
  }
}
