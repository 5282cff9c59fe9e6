// gyre_peer_loss_check VICTIM [stop]: one rank of a job started by any launcher. With `stop`, the
// victim stops itself with SIGSTOP instead (it does not die, it stops answering): the survivors
// then time out, print their error and exit 2. Every rank runs
// allreduces of 1 MiB in a loop; at step 5 rank VICTIM prints "rank V: killed at <ns>" and
// kills itself with SIGKILL. Every survivor must then fail with PeerLostError naming VICTIM; it
// prints "rank R: lost rank <L> at <ns>: <message>" and exits 0. Times are CLOCK_MONOTONIC
// nanoseconds, comparable between the processes of one host. A survivor that sees another
// error prints it and exits 2; one that never sees a failure exits 1.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace {

long long nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string(argv[2]) == "stop")) {
    std::fprintf(stderr, "usage: gyre_peer_loss_check VICTIM_RANK [stop]\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]);
  const bool stop = argc == 3;
  int rank = -1;
  try {
    auto world = gyre::init();
    rank = world->rank();
    std::vector<float> buffer(1 << 18, 1.0f);
    for (int step = 0; step < 1000; ++step) {
      if (rank == victim && step == 5) {
        std::printf("rank %d: %s at %lld\n", rank, stop ? "stopped" : "killed", nowNs());
        std::fflush(stdout);
        raise(stop ? SIGSTOP : SIGKILL);
      }
      try {
        world->allreduce(buffer.data(), buffer.data(), buffer.size(),
                         {gyre::DataType::kFloat32, gyre::ReduceOp::kMax, gyre::AllreduceAlgorithm::kRing});
      } catch (const gyre::PeerLostError& e) {
        std::printf("rank %d: lost rank %d at %lld: %s\n", rank, e.rank(), nowNs(), e.what());
        std::fflush(stdout);
        return 0;
      }
    }
    std::fprintf(stderr, "rank %d: no failure seen in 1000 steps\n", rank);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 2;
  }
}
