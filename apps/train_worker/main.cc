// gyre_train_worker: one worker of `gyre train`. `gyre train` starts N of them through the launcher
// (which sets GYRE_RANK, GYRE_WORLD_SIZE, ... for gyre::init()); run alone it is a world of one,
// and with --plain it trains in this process without gyre at all (the benchmarks' plain loop).
// Its flags are generated from the table `gyre train` uses (src/train/options.h). In a generation that
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
  // The flags `gyre train` passes on, and --plain; declared once in src/train/options.cc.
  gyre::train::addTrainFlags(app, o, gyre::train::FlagScope::kWorker);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
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
