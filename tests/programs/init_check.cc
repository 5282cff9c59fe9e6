// gyre_init_check: the smallest whole gyre program. It bootstraps from whatever launcher started
// it (gyre::init(): gyre run, mpirun, srun, torchrun or none), sums one number over every rank,
// and prints `rank R of N ok (...)`. The process tests run it under real launchers; on a cluster
// it checks a batch script before a long job does (docs/launching.md).
// Exit status: 0 when the sum is right, 1 on any error (printed on stderr).
#include <cstdio>
#include <exception>

#include "common/logging.h"
#include "gyre/gyre.h"

int main() {
  try {
    auto world = gyre::init();
    // What init() read, for the message; quietly, since init() has already said its warnings.
    const gyre::log::Level level = gyre::log::level();
    gyre::log::setLevel(gyre::log::Level::kError);
    const gyre::LaunchInfo launch = gyre::detectLaunch(gyre::processEnvironment());
    gyre::log::setLevel(level);
    const int rank = world->rank();
    const int size = world->size();
    // Rank r contributes r + 1; the sum over all ranks is size (size + 1) / 2, exact in float.
    float value = static_cast<float>(rank + 1);
    world->allreduce(&value, &value, 1);
    const float expected = static_cast<float>(size) * static_cast<float>(size + 1) / 2.0f;
    if (value != expected) {
      std::fprintf(stderr, "gyre_init_check: rank %d of %d: allreduce gave %g, expected %g\n", rank, size,
                   static_cast<double>(value), static_cast<double>(expected));
      return 1;
    }
    world->barrier();
    std::printf("rank %d of %d ok (launcher %s, local rank %d of %d, store %s)\n", rank, size,
                launch.launcher.c_str(), launch.localRank, launch.localSize,
                launch.storeAddress.empty() ? "in-process" : launch.storeAddress.c_str());
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre_init_check: %s\n", e.what());
    return 1;
  }
}
