// gyre_train_worker: one worker of `gyre train`. `gyre train` starts N of them through the launcher
// (which sets GYRE_RANK, GYRE_WORLD_SIZE, ... for gyre::init()); run alone it is a world of one,
// and with --plain it trains in this process without gyre at all (the benchmarks' plain loop).
// Its flags are generated from the table `gyre train` uses (src/train/options.h). In a generation that
// the launcher restarted (GYRE_RESTART_COUNT > 0, `gyre train --max-restarts`) it behaves as with
// --resume when it has a --checkpoint-dir.
#include <malloc.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "train/trainer.h"

namespace {

// GYRE_RESTART_COUNT (docs/configuration.md), set by gyre run in every worker; 0 when unset.
int restartCount() {
  return static_cast<int>(
      gyre::config::getOptionalInt(gyre::config::processEnvironment(), "GYRE_RESTART_COUNT").value_or(0));
}

// GYRE_RANK, for the one warning only rank 0 prints; 0 when unset (a world of one).
std::int64_t rankFromEnvironment() {
  return gyre::config::getOptionalInt(gyre::config::processEnvironment(), "GYRE_RANK").value_or(0);
}

// --memory-limit-mb: this process's RLIMIT_DATA (its heap and private writable mappings). Under a
// limit, every block of 1 MiB or more is a mapping of its own, given back whole when freed:
// glibc's default would raise that threshold to the largest block freed (up to 32 MiB), so a
// step's freed tensors would stay in the heap, counted against the limit (a ZeRO-3 worker's
// gradients and gathered units, then the whole model gathered on worker 0 for model.pt).
void limitMemory(std::int64_t mib) {
  if (mib <= 0) return;
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const auto bytes = static_cast<rlim_t>(mib) << 20;
  const rlimit limit{bytes, bytes};
  if (setrlimit(RLIMIT_DATA, &limit) != 0)
    throw gyre::InvalidArgument("--memory-limit-mb " + std::to_string(mib) + ": setrlimit(RLIMIT_DATA) failed: " +
                                std::strerror(errno));
}

// An allocation that failed, from libtorch's allocator or from operator new.
bool outOfMemory(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
         std::strstr(e.what(), "can't allocate memory") != nullptr;
}

// The first line of libtorch's message (the rest is a C++ backtrace).
std::string firstLine(const char* text) {
  const std::string s(text);
  return s.substr(0, s.find('\n'));
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
    const auto env = gyre::config::processEnvironment();
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
    limitMemory(o.memoryLimitMb);
    gyre::train::runTraining(o);
    return 0;
  } catch (const gyre::InvalidArgument& e) {
    std::fprintf(stderr, "gyre train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    if (outOfMemory(e)) {
      const std::string limit =
          o.memoryLimitMb > 0 ? " of its " + std::to_string(o.memoryLimitMb) + " MiB (--memory-limit-mb)" : "";
      std::fprintf(stderr,
                   "gyre train: error: worker %lld is out of memory%s: %s\n"
                   "gyre train: --zero 3 shards the parameters, gradients and optimizer state across the workers, "
                   "--pp splits the model into stages; a smaller --batch needs fewer activations\n",
                   static_cast<long long>(rankFromEnvironment()), limit.c_str(), firstLine(e.what()).c_str());
      return 1;
    }
    std::fprintf(stderr, "gyre train: error: %s\n", e.what());
    return 1;
  }
}
