#include "bench.h"

#include "bench_collectives.h"
#include "bench_comm.h"
#include "bench_data.h"
#include "bench_parallel.h"
#include "bench_ps.h"
#include "bench_rt.h"
#include "bench_serve.h"
#include "bench_train.h"

namespace gyre::app {

void addBench(CLI::App& app, std::function<int()>& action, const std::vector<std::string>& args) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Measure gyre's performance (against OpenMPI, a plain libtorch loop and PyTorch DDP)");
  bench->require_subcommand(1);
  bench->footer("See docs/benchmarks.md for what each benchmark measures and how to read it.");
  addBenchCollectives(*bench, action, args);
  addBenchTrain(*bench, action);
  addBenchPs(*bench, action);
  addBenchComm(*bench, action);
  addBenchParallel(*bench, action);
  addBenchRt(*bench, action);
  addBenchServe(*bench, action);
  addBenchData(*bench, action);
}

}  // namespace gyre::app
