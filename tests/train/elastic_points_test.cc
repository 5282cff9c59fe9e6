// `gyre train --elastic` with one of its 2 workers killed at several points of a run, and a
// replacement joining later: the survivor goes on alone, rolled back to its last commit, and the
// two train together again. The batch is cut into 2 fixed shards (--batch-shards, default --np),
// so the lone survivor computes each step's gradient as the pair does, bit for bit: the run must
// end with the steps.jsonl, the epochs' loss and test accuracy and the model.pt of the run without
// the fault. Skipped without gyre_train_worker or the data set.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"
#include "train/models.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::jsonLines;

// 2 workers, 2 epochs of 40 steps of 64 samples, a commit every 4 steps.
std::vector<std::string> command(const std::string& runDir, const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv = {cli::gyreTool(), "train",      "--model",         "mlp",   "--np",   "2",
                                   "--epochs",      "2",          "--max-steps",     "40",    "--batch", "64",
                                   "--threads",     "1",          "--progress",      "off",   "--elastic",
                                   "--min-np",      "1",          "--commit-every",  "4",     "--max-restarts",
                                   "1",             "--run-dir",  runDir};
  argv.insert(argv.end(), more.begin(), more.end());
  return argv;
}

std::vector<::torch::Tensor> loadModel(const std::string& path) {
  ::torch::nn::Sequential model = makeModel("mlp");
  ::torch::load(model, path);
  return model->parameters();
}

// The lines of steps.jsonl written so far (rank 0 rewrites it at every commit).
std::size_t stepsWritten(const std::string& runDir) {
  std::ifstream in(runDir + "/steps.jsonl");
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

class ElasticPointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cli::haveTrainer() || !cli::haveData()) return;
    clean_ = new test::TempDir;
    cleanRun_ = new test::ProgramRun(
        test::runProgram({command(clean_->path() + "/run"), test::cleanEnvironment()}, std::chrono::seconds(300)));
  }
  static void TearDownTestSuite() {
    delete cleanRun_;
    delete clean_;
    cleanRun_ = nullptr;
    clean_ = nullptr;
  }
  void SetUp() override {
    if (!cli::haveTrainer()) GTEST_SKIP() << "no gyre_train_worker in this build";
    if (!cli::haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    ASSERT_EQ(cleanRun_->exitCode, 0) << cleanRun_->describe() << "\nstdout:\n" << cleanRun_->out;
  }
  static std::string clean(const std::string& name) { return clean_->path() + "/" + name; }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

  // The run went on past the lost worker, and ended as the clean run did. (Whether the
  // replacement joins before the end, "membership 3: 2 workers", depends on how fast it starts.)
  void expectTheCleanRun(const test::ProgramRun& faulty) {
    const std::string all = faulty.out + faulty.err;
    ASSERT_EQ(faulty.exitCode, 0) << faulty.describe() << "\nstdout:\n" << faulty.out;
    EXPECT_TRUE(contains(all, "elastic: membership 2: 1 worker")) << all;
    EXPECT_TRUE(contains(all, "went on past 1 failure(s)")) << all;

    const auto wantSteps = jsonLines(clean("run/steps.jsonl"));
    const auto gotSteps = jsonLines(path("run/steps.jsonl"));
    ASSERT_EQ(wantSteps.size(), 80u);
    ASSERT_EQ(gotSteps.size(), wantSteps.size()) << all;
    for (std::size_t i = 0; i < wantSteps.size(); ++i) EXPECT_EQ(gotSteps[i].dump(), wantSteps[i].dump());

    const auto want = jsonLines(clean("run/metrics.jsonl"));
    const auto got = jsonLines(path("run/metrics.jsonl"));
    ASSERT_EQ(want.size(), 2u);
    ASSERT_EQ(got.size(), want.size()) << all;
    for (std::size_t e = 0; e < want.size(); ++e)
      for (const char* key : {"epoch", "loss", "test_accuracy"})
        EXPECT_EQ(got[e].at(key), want[e].at(key)) << "epoch " << e + 1 << ": " << key;

    const auto a = loadModel(path("run/model.pt"));
    const auto b = loadModel(clean("run/model.pt"));
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << "parameter " << i;
  }

  static test::TempDir* clean_;
  static test::ProgramRun* cleanRun_;
  test::TempDir dir_;
};

test::TempDir* ElasticPointTest::clean_ = nullptr;
test::ProgramRun* ElasticPointTest::cleanRun_ = nullptr;

struct Point {
  std::string point;  // --fault-point (an elastic job's faults strike after a step)
  int step;           // --fault-at-step
  int worker;         // --fault-rank: a worker id
};

// The worker kills itself (SIGKILL) after a step: between commits, at a commit, and in the second
// epoch; worker 0 (rank 0, the one writing the run directory) and worker 1.
TEST_F(ElasticPointTest, AWorkerKilledAtAStepLeavesTheTrajectoryOfTheCleanRun) {
  for (const Point& p : {Point{"after-step", 6, 1}, Point{"after-step", 16, 0}, Point{"after-step", 53, 1}}) {
    SCOPED_TRACE(p.point + " " + std::to_string(p.step) + ", worker " + std::to_string(p.worker));
    std::filesystem::remove_all(path("run"));
    const test::ProgramRun faulty = test::runProgram(
        {command(path("run"), {"--fault-at-step", std::to_string(p.step), "--fault-rank", std::to_string(p.worker),
                               "--fault-point", p.point}),
         test::cleanEnvironment()},
        std::chrono::seconds(300));
    EXPECT_TRUE(contains(faulty.out + faulty.err, "injecting a fault: worker " + std::to_string(p.worker)))
        << faulty.out + faulty.err;
    expectTheCleanRun(faulty);
  }
}

// SIGKILL from outside, whenever the first commits are on disk: wherever the worker was.
TEST_F(ElasticPointTest, AWorkerKilledFromOutsideLeavesTheTrajectoryOfTheCleanRun) {
  const std::string runDir = path("run");
  std::future<test::ProgramRun> job =
      test::startProgram({command(runDir), test::cleanEnvironment()}, std::chrono::seconds(300));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (stepsWritten(runDir) < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // The workers of this job: their command line names its run directory.
  std::vector<std::string> workers;
  for (const std::string& p : test::processesWith(runDir))
    if (contains(p, "gyre_train_worker")) workers.push_back(p);
  ASSERT_EQ(workers.size(), 2u) << "after " << stepsWritten(runDir) << " steps";
  ASSERT_EQ(::kill(std::stoi(workers[1]), SIGKILL), 0);
  expectTheCleanRun(job.get());
}

}  // namespace
}  // namespace gyre::train
