// `gyre train` with checkpoints, as a user runs it: a run stopped midway (--stop-at-step) and
// resumed (--resume) trains exactly the steps, with exactly the losses, of an uninterrupted run;
// a run saved by 1 worker continues on 2; flag mistakes and a checkpoint directory in use exit 2.
// Skipped when the build has no gyre_train_worker or the data set is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gyre/torch/checkpoint.h"
#include "gyre/torch/data.h"
#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "train/cli_support.h"

namespace gyre::train {
namespace {

using cli::contains;
using cli::gyreTool;
using cli::haveData;
using cli::haveTrainer;
using cli::jsonLines;

// cli::checkpointedRun with a warm-up before the cosine schedule.
test::ProgramRun trainWithCheckpoints(const std::string& runDir, const std::string& checkpointDir, int np,
                                      std::vector<std::string> more = {}, const std::string& batch = "64") {
  more.insert(more.begin(), {"--warmup-epochs", "0.5"});
  return cli::checkpointedRun(runDir, checkpointDir, np, more, batch);
}

class CheckpointCli : public cli::TrainerTest {};

TEST_F(CheckpointCli, BadFlagsExit2) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--checkpoint-every", "5"}, "--checkpoint-every needs --checkpoint-dir"},
      {{"--resume"}, "--resume needs --checkpoint-dir"},
      {{"--checkpoint-dir", path("c"), "--keep-last", "0"}, "--keep-last must be an integer of at least 1"},
      {{"--checkpoint-dir", path("c"), "--checkpoint-every", "-1"},
       "--checkpoint-every must be an integer of at least 0"},
      {{"--stop-at-step", "-3"}, "--stop-at-step must be an integer of at least 0"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {gyreTool(), "train", "--np", "1"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const test::ProgramRun r = test::runProgram({argv, test::cleanEnvironment()}, cli::kTrainTimeout);
    EXPECT_EQ(r.exitCode, 2) << c.args.front() << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "' in:\n" << r.err;
  }
}

TEST_F(CheckpointCli, StoppedAndResumedRunMatchesAnUninterruptedOne) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const test::ProgramRun whole = trainWithCheckpoints(path("whole"), path("whole-ckpt"), 2);
  ASSERT_EQ(whole.exitCode, 0) << whole.describe() << "\nstdout:\n" << whole.out;
  EXPECT_TRUE(contains(whole.out, "checkpoint at step 5: ")) << whole.out;
  EXPECT_TRUE(contains(whole.out, "training stalled")) << whole.out;
  // Saved at 5, 10, 15, 20 and at the end (24); --keep-last 3 (the default) leaves three.
  const auto kept = gyre::torch::listCheckpoints(path("whole-ckpt"));
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].step, 15);
  EXPECT_EQ(kept[2].step, 24);

  // Stopped in the middle of epoch 2 (step 17 = its 5th step), then resumed in the same directories.
  const test::ProgramRun first =
      trainWithCheckpoints(path("cut"), path("cut-ckpt"), 2, {"--stop-at-step", "17"});
  ASSERT_EQ(first.exitCode, 0) << first.describe() << "\nstdout:\n" << first.out;
  EXPECT_TRUE(contains(first.out, "stopped after step 17")) << first.out;
  EXPECT_EQ(gyre::torch::listCheckpoints(path("cut-ckpt")).back().step, 17);

  const test::ProgramRun again = trainWithCheckpoints(path("cut"), path("cut-ckpt"), 2);
  EXPECT_EQ(again.exitCode, 2) << "an existing checkpoint directory needs --resume: " << again.describe();
  EXPECT_TRUE(contains(again.err, "pass --resume")) << again.err;

  const auto resumeBegin = std::chrono::steady_clock::now();
  const test::ProgramRun resumed = trainWithCheckpoints(path("cut"), path("cut-ckpt"), 2, {"--resume"});
  const double resumeWall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - resumeBegin).count();
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe() << "\nstdout:\n" << resumed.out;
  EXPECT_TRUE(
      contains(resumed.out, "resumed from " + path("cut-ckpt") + "/ckpt-000000000017: step 17, epoch 2/2"))
      << resumed.out;

  const auto expected = jsonLines(path("whole") + "/steps.jsonl");
  const auto actual = jsonLines(path("cut") + "/steps.jsonl");
  ASSERT_EQ(expected.size(), 24u);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].at("step"), static_cast<int>(i + 1));
    // Bit for bit: the losses (printed with round-trip precision) and rates are the same doubles.
    EXPECT_EQ(actual[i].dump(), expected[i].dump()) << "step " << i + 1;
  }
  // Epoch 1's line from the first run, epoch 2's from the resumed one.
  const auto metrics = jsonLines(path("cut") + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].at("epoch"), 1);
  EXPECT_EQ(metrics[1].at("epoch"), 2);
  EXPECT_EQ(metrics[1].at("steps"), 7);
  ASSERT_FALSE(metrics[1].at("checkpoints").empty());
  EXPECT_EQ(metrics[1].at("checkpoints").back().at("step"), 24);
  EXPECT_GT(metrics[1].at("checkpoints").back().at("bytes").get<double>(), 0);
  // Each save serialises the model and optimizer in the training loop's thread: a stall that took
  // time, inside the resumed run.
  for (const auto& save : metrics[1].at("checkpoints")) {
    EXPECT_GT(save.at("stall_s").get<double>(), 0) << save;
    EXPECT_LT(save.at("stall_s").get<double>(), resumeWall) << save;
  }
}

TEST_F(CheckpointCli, OneWorkerRunContinuesOnTwo) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const test::ProgramRun whole = trainWithCheckpoints(path("whole"), path("whole-ckpt"), 1);
  ASSERT_EQ(whole.exitCode, 0) << whole.describe();
  const test::ProgramRun first =
      trainWithCheckpoints(path("grow"), path("grow-ckpt"), 1, {"--stop-at-step", "7"});
  ASSERT_EQ(first.exitCode, 0) << first.describe();
  // The newest checkpoint (step 7) gets a flipped byte: the resume reports it, moves it aside and
  // continues from step 5.
  const std::string newest = path("grow-ckpt") + "/ckpt-000000000007";
  {
    std::fstream f(newest + "/model.pt", std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.seekg(4000);
    f.get(c);
    f.seekp(4000);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  const test::ProgramRun resumed = trainWithCheckpoints(path("grow"), path("grow-ckpt"), 2, {"--resume"});
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe() << "\nstdout:\n" << resumed.out;
  EXPECT_TRUE(contains(resumed.err, "gyre: skipping checkpoint " + newest + ": model.pt: corrupted (CRC32C "))
      << resumed.err;
  EXPECT_TRUE(std::filesystem::is_directory(newest + ".invalid"));
  EXPECT_TRUE(contains(resumed.out, "resumed from " + path("grow-ckpt") +
                                        "/ckpt-000000000005: step 5, epoch 1/2 "
                                        "from its step 5 of 12"))
      << resumed.out;

  // Steps 6.. ran on 2 workers (32 samples each) over the same samples: the same losses as one
  // worker's, up to rounding. A run that had not restored the model would differ at once.
  const auto expected = jsonLines(path("whole") + "/steps.jsonl");
  const auto actual = jsonLines(path("grow") + "/steps.jsonl");
  ASSERT_EQ(expected.size(), 24u);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].at("step"), static_cast<int>(i + 1));
    const double want = expected[i].at("loss").get<double>();
    const double got = actual[i].at("loss").get<double>();
    EXPECT_NEAR(got, want, 1e-4 * std::abs(want)) << "step " << i + 1;
    if (i < 5) {
      EXPECT_EQ(got, want) << "step " << i + 1 << " ran on one worker in both";
    }
  }
  const auto metrics = jsonLines(path("grow") + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].at("world"), 2);
  EXPECT_EQ(metrics[0].at("per_rank_batch"), 32);
  EXPECT_EQ(metrics[0].at("steps"), 7);

  // Another global batch cannot continue this run.
  const test::ProgramRun other =
      trainWithCheckpoints(path("grow"), path("grow-ckpt"), 2, {"--resume"}, "128");
  EXPECT_EQ(other.exitCode, 2) << other.describe();
  EXPECT_TRUE(contains(other.err, "--batch 64, this run has --batch 128")) << other.err;
}

}  // namespace
}  // namespace gyre::train
