// gyre_restart_check: a worker for `gyre run --max-restarts` tests. It reads its generation
// (GYRE_RESTART_COUNT), joins the job's rendezvous with gyre::init(), checks an allreduce, writes
// what it saw to DIR/gen.G.rank.R, and waits at a barrier until every rank has written. Then, in
// generations below FAIL_GENERATIONS, rank FAIL_RANK fails (HOW: `exitN` exits with code N,
// `kill` sends itself SIGKILL) while the other ranks wait to be stopped; in later generations
// every rank exits 0.
//
//   gyre_restart_check DIR FAIL_RANK FAIL_GENERATIONS HOW
//
// The file holds one line:
//   generation G of max M rank R of N store HOST:PORT secret FINGERPRINT job JOB sum ok
// where FINGERPRINT is a hash of GYRE_SECRET (so a test can tell secrets apart without seeing
// them). Exit status otherwise: 2 for bad arguments, 1 for any error (printed on stderr).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "gyre/gyre.h"

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: gyre_restart_check DIR FAIL_RANK FAIL_GENERATIONS exitN|kill\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int failRank = std::atoi(argv[2]);
  const int failGenerations = std::atoi(argv[3]);
  const std::string how = argv[4];
  if (env("GYRE_RESTART_COUNT").empty()) {
    std::fprintf(stderr, "gyre_restart_check: GYRE_RESTART_COUNT is not set\n");
    return 2;
  }
  const int generation = std::atoi(env("GYRE_RESTART_COUNT").c_str());
  try {
    auto world = gyre::init();
    const int rank = world->rank();
    const int size = world->size();
    // Rank r contributes r + 1; the sum over all ranks is size (size + 1) / 2, exact in float.
    float value = static_cast<float>(rank + 1);
    world->allreduce(&value, &value, 1);
    const float expected = static_cast<float>(size) * static_cast<float>(size + 1) / 2.0f;
    if (value != expected) {
      std::fprintf(stderr, "gyre_restart_check: rank %d: allreduce gave %g, expected %g\n", rank,
                   static_cast<double>(value), static_cast<double>(expected));
      return 1;
    }
    char fingerprint[32];
    std::snprintf(fingerprint, sizeof fingerprint, "%016zx", std::hash<std::string>{}(env("GYRE_SECRET")));
    {
      const std::string path = dir + "/gen." + std::to_string(generation) + ".rank." + std::to_string(rank);
      std::ofstream out(path);
      out << "generation " << generation << " of max " << env("GYRE_MAX_RESTARTS") << " rank " << rank
          << " of " << size << " store " << env("GYRE_STORE_ADDR") << " secret " << fingerprint << " job "
          << env("GYRE_JOB_ID") << " sum ok\n";
      if (!out.flush()) {
        std::fprintf(stderr, "gyre_restart_check: cannot write %s\n", path.c_str());
        return 1;
      }
    }
    std::printf("generation %d rank %d of %d ok\n", generation, rank, size);
    std::fflush(stdout);
    world->barrier();  // every rank has written its file
    if (generation < failGenerations) {
      if (rank == failRank) {
        std::printf("generation %d rank %d fails (%s)\n", generation, rank, how.c_str());
        std::fflush(stdout);
        if (how == "kill") std::raise(SIGKILL);
        if (how.rfind("exit", 0) == 0) return std::atoi(how.c_str() + 4);
        std::fprintf(stderr, "gyre_restart_check: unknown HOW '%s'\n", how.c_str());
        return 2;
      }
      // The launcher stops the survivors; a launcher that does not is caught here.
      std::this_thread::sleep_for(std::chrono::seconds(120));
      std::fprintf(stderr, "gyre_restart_check: rank %d was not stopped after its peer failed\n", rank);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre_restart_check: generation %d: %s\n", generation, e.what());
    return 1;
  }
}
