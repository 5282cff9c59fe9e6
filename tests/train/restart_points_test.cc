// `gyre train --max-restarts 1` with a worker killed at each point of a run where a restart can
// begin (--fault-point): before the first step, after a mid-epoch checkpoint, at an epoch's end
// (after its checkpoint, before its record; after its record), after the last step, during and
// after the final checkpoint, after the last record. Every one must end as a clean run does: one
// metrics.jsonl line per epoch with the same loss and test accuracy, the same steps.jsonl, the
// same final checkpoint and model.pt. Skipped without gyre_train_worker or the data set.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "gyre/torch/checkpoint.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"
#include "train/models.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::jsonLines;

// 2 workers, 2 epochs of 12 steps of 64 samples, evaluated after each epoch.
test::ProgramRun run(const std::string& runDir, const std::string& checkpointDir, int every,
                     const std::vector<std::string>& more = {}) {
  std::vector<std::string> argv = {cli::gyreTool(),
                                   "train",
                                   "--model",
                                   "mlp",
                                   "--np",
                                   "2",
                                   "--epochs",
                                   "2",
                                   "--max-steps",
                                   "12",
                                   "--batch",
                                   "64",
                                   "--threads",
                                   "1",
                                   "--progress",
                                   "off",
                                   "--lr-schedule",
                                   "cosine",
                                   "--run-dir",
                                   runDir,
                                   "--checkpoint-dir",
                                   checkpointDir,
                                   "--checkpoint-every",
                                   std::to_string(every)};
  argv.insert(argv.end(), more.begin(), more.end());
  return test::runProgram({argv, test::cleanEnvironment()}, std::chrono::seconds(600));
}

std::vector<::torch::Tensor> loadModel(const std::string& path) {
  ::torch::nn::Sequential model = makeModel("mlp");
  ::torch::load(model, path);
  return model->parameters();
}

void expectSameModel(const std::string& got, const std::string& want) {
  const auto a = loadModel(got);
  const auto b = loadModel(want);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].equal(b[i])) << got << ": parameter " << i;
}

struct Point {
  std::string name;
  std::string point;  // --fault-point
  int step;           // --fault-at-step
  int rank;           // --fault-rank
  int every;          // --checkpoint-every: 6 puts a checkpoint at epoch 1's end (step 12)
  int resumedFrom;    // the checkpoint the restart resumes from (0: none)
  bool recovers;      // the restart writes the record of the checkpoint's epoch
};

void PrintTo(const Point& p, std::ostream* out) {
  *out << p.name;
}

class RestartPointTest : public ::testing::TestWithParam<Point> {
 protected:
  static void SetUpTestSuite() {
    if (!cli::haveTrainer() || !cli::haveData()) return;
    clean_ = new test::TempDir;
    cleanRun_ = new test::ProgramRun(run(clean_->path() + "/run", clean_->path() + "/ckpt", 5));
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

  static test::TempDir* clean_;
  static test::ProgramRun* cleanRun_;
  test::TempDir dir_;
};

test::TempDir* RestartPointTest::clean_ = nullptr;
test::ProgramRun* RestartPointTest::cleanRun_ = nullptr;

TEST_P(RestartPointTest, EndsWithTheFilesAndModelOfACleanRun) {
  const Point& p = GetParam();
  const test::ProgramRun faulty = run(path("run"), path("ckpt"), p.every,
                                      {"--max-restarts", "1", "--fault-at-step", std::to_string(p.step),
                                       "--fault-rank", std::to_string(p.rank), "--fault-point", p.point});
  const std::string all = faulty.out + faulty.err;
  ASSERT_EQ(faulty.exitCode, 0) << faulty.describe() << "\nstdout:\n" << faulty.out;
  ASSERT_TRUE(contains(all, "injecting a fault: rank " + std::to_string(p.rank))) << all;
  ASSERT_TRUE(contains(all, "restarting all 2 workers (restart 1 of 1)")) << all;
  // The point is deterministic: the restart always begins at the same place.
  char checkpoint[32];
  std::snprintf(checkpoint, sizeof checkpoint, "/ckpt-%012d: step %d,", p.resumedFrom, p.resumedFrom);
  EXPECT_TRUE(contains(faulty.out, p.resumedFrom == 0
                                       ? "restart 1: no valid checkpoint"
                                       : "restart 1: resumed from " + path("ckpt") + checkpoint))
      << faulty.out;
  EXPECT_EQ(contains(faulty.out, "has no record in"), p.recovers) << faulty.out;

  // One line per epoch, as the clean run's: the same keys, and the same figures where they do
  // not depend on timing or on when checkpoints were written.
  const auto want = jsonLines(clean("run/metrics.jsonl"));
  const auto got = jsonLines(path("run/metrics.jsonl"));
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), want.size()) << all;
  for (std::size_t e = 0; e < want.size(); ++e) {
    for (const auto& [key, value] : want[e].items())
      EXPECT_TRUE(got[e].contains(key)) << "epoch " << e + 1 << ": " << key;
    for (const char* key :
         {"epoch", "epochs", "world", "model", "batch", "per_rank_batch", "loss", "test_accuracy"})
      EXPECT_EQ(got[e].at(key), want[e].at(key)) << "epoch " << e + 1 << ": " << key;
    EXPECT_TRUE(got[e].at("test_accuracy").is_number()) << "epoch " << e + 1;
  }

  const auto wantSteps = jsonLines(clean("run/steps.jsonl"));
  const auto gotSteps = jsonLines(path("run/steps.jsonl"));
  ASSERT_EQ(gotSteps.size(), wantSteps.size());
  for (std::size_t i = 0; i < wantSteps.size(); ++i) EXPECT_EQ(gotSteps[i].dump(), wantSteps[i].dump());

  expectSameModel(path("run/model.pt"), clean("run/model.pt"));
  std::string finalCheckpoint;
  for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(path("ckpt")))
    if (c.complete) finalCheckpoint = c.step == 24 ? c.path : "";
  ASSERT_FALSE(finalCheckpoint.empty()) << "the newest complete checkpoint is not step 24's";
  EXPECT_EQ(gyre::torch::verifyCheckpoint(finalCheckpoint), "");
  expectSameModel(finalCheckpoint + "/model.pt", clean("run/model.pt"));
}

INSTANTIATE_TEST_SUITE_P(
    Points, RestartPointTest,
    ::testing::Values(Point{"BeforeTheFirstStep", "before-step", 1, 1, 5, 0, false},
                      Point{"MidEpochAfterACheckpoint", "after-checkpoint", 5, 1, 5, 5, false},
                      Point{"EpochEndBeforeItsRecord", "after-checkpoint", 12, 1, 6, 12, true},
                      Point{"EpochEndAfterItsRecord", "after-record", 12, 0, 6, 12, false},
                      Point{"AfterTheLastStep", "after-step", 24, 1, 5, 20, false},
                      Point{"DuringTheFinalCheckpoint", "in-checkpoint", 24, 0, 5, 20, false},
                      Point{"AfterTheFinalCheckpointBeforeTheRecord", "after-checkpoint", 24, 0, 5, 24, true},
                      Point{"AfterTheLastRecord", "after-record", 24, 1, 5, 24, false}),
    [](const ::testing::TestParamInfo<Point>& point) { return point.param.name; });

}  // namespace
}  // namespace gyre::train
