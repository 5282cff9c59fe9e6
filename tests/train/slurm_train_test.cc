// Training under a real Slurm (tests/slurm/cluster.sh): the batch script of docs/launching.md
// (examples/slurm/train.sbatch, gyre run inside the allocation) and a plain `srun -n 2` of the
// worker train to the accuracy of the same job under gyre run outside Slurm.
#include <gtest/gtest.h>

#include <string>

#include "cli_support.h"
#include "support/jobs.h"
#include "support/slurm_cluster.h"

namespace gyre::train::cli {
namespace {

class SlurmTrain : public test::SlurmTest {
 protected:
  void SetUp() override {
    test::SlurmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!haveTrainer()) GTEST_SKIP() << "no gyre_train_worker in this build";
    if (!haveData()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  }
  static double accuracy(const std::string& runDir) {
    const auto metrics = jsonLines(runDir + "/metrics.jsonl");
    return metrics.empty() ? -1 : metrics.back().at("test_accuracy").get<double>();
  }
};

TEST_F(SlurmTrain, TheDocumentedBatchScriptAndSrunTrainAsGyreRunDoes) {
  const std::string run = dir() + "/local";
  test::Environment e = test::cleanEnvironment();
  e["GYRE_NUM_THREADS"] = "1";
  const test::ProgramRun local = test::runProgram({{gyreTool(), "run", "-np", "2", "--", trainWorker(),
                                                    "--model", "mlp", "--epochs", "1", "--run-dir", run},
                                                   e},
                                                  std::chrono::seconds(300));
  ASSERT_EQ(local.exitCode, 0) << local.describe();

  // The script as a user submits it, from a directory of their own; it reads GYRE_BIN and EPOCHS.
  const test::ProgramRun batch =
      slurm("sbatch",
            {"--parsable", "--wait", "--chdir", dir(), "--output", dir() + "/train.out",
             "--export=ALL,EPOCHS=1,GYRE_BIN=" + test::binDir(),
             test::sourceDir() + "/examples/slurm/train.sbatch"},
            std::chrono::seconds(300));
  ASSERT_EQ(batch.exitCode, 0) << batch.describe() << test::readFile(dir() + "/train.out");
  const std::string job = batch.out.substr(0, batch.out.find_first_of(";\n"));
  const double fromScript = accuracy(dir() + "/runs/slurm-" + job);

  // srun starts the workers itself; they meet through Slurm's variables.
  const test::ProgramRun srun = slurm("srun",
                                      {"-n", "2", "--export=ALL,GYRE_NUM_THREADS=1", trainWorker(), "--model",
                                       "mlp", "--epochs", "1", "--run-dir", dir() + "/srun"},
                                      std::chrono::seconds(300));
  ASSERT_EQ(srun.exitCode, 0) << srun.describe();

  const double want = accuracy(run);
  ASSERT_GT(want, 0.8);
  EXPECT_NEAR(fromScript, want, 0.005) << test::readFile(dir() + "/train.out");
  EXPECT_NEAR(accuracy(dir() + "/srun"), want, 0.005) << srun.out;
  EXPECT_EQ(squeue(), "");
}

}  // namespace
}  // namespace gyre::train::cli
