// gyre_elastic_counter: a worker of `gyre run --elastic` tests that trains with the gyre::elastic
// library (public API only): a counter, one allreduce per step, committed every few steps, so
// the state after step s is a function of s alone, whatever the world.
//
//   gyre_elastic_counter STEPS [--step-ms MS] [--commit-every N] [--stop ID@STEP]
//
// Each step sleeps MS (default 10) after its allreduce. `--stop ID@STEP` makes worker ID stop
// itself (SIGSTOP) at step STEP: it stops answering without exiting. Prints, on stdout,
// `worker <id>: rank <r> of <n>` at each membership and `worker <id>: done at step <s>, sum <v>`
// at the end (the sum must equal the steps); exits 0, or 1 with the error.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "gyre/elastic.h"
#include "gyre/init.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: gyre_elastic_counter STEPS [--step-ms MS] [--commit-every N] [--stop ID@STEP]\n");
    return 2;
  }
  const long steps = std::atol(argv[1]);
  long stepMs = 10, every = 5, stopId = -1, stopStep = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--step-ms") {
      stepMs = std::atol(argv[i + 1]);
    } else if (flag == "--commit-every") {
      every = std::atol(argv[i + 1]);
    } else if (flag == "--stop" && std::sscanf(argv[i + 1], "%ld@%ld", &stopId, &stopStep) == 2) {
    } else {
      std::fprintf(stderr, "gyre_elastic_counter: bad option %s %s\n", flag.c_str(), argv[i + 1]);
      return 2;
    }
  }
  const char* idText = std::getenv("GYRE_ELASTIC_ID");
  const long id = idText != nullptr ? std::atol(idText) : 0;
  try {
    gyre::elastic::State state;
    state.values["step"] = 0;
    state.reals["sum"] = 0;
    gyre::elastic::run(state, [&](const std::shared_ptr<gyre::Communicator>& comm) {
      std::printf("worker %ld: rank %d of %d\n", id, comm->rank(), comm->size());
      std::fflush(stdout);
      while (state.values["step"] < steps) {
        double share = 1.0 / comm->size();
        comm->allreduce(&share, &share, 1, {gyre::DataType::kFloat64});
        state.reals["sum"] += share;
        const long step = ++state.values["step"];
        if (id == stopId && step == stopStep) raise(SIGSTOP);
        std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));
        if (step % every == 0) state.commit();
      }
    });
    std::printf("worker %ld: done at step %lld, sum %.6f\n", id, static_cast<long long>(state.values["step"]),
                state.reals["sum"]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %ld: %s\n", id, e.what());
    return 1;
  }
}
