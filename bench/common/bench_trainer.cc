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

}  // namespace gyre::app
