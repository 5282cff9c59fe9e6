// `gyre train --max-restarts` as a user runs it, with a real SIGKILL: a worker killed midway
// (--fault-at-step) is restarted with the others, the new generation resumes from the newest
// checkpoint, the run ends with exactly the steps and losses of a run without the fault, and
// progress.jsonl shows what the failure cost. Also the fault-injection harness
// (scripts/fault-injection.py) with one seed, and the flag mistakes that exit 2.
// Skipped when the build has no gyre_train_worker or the data set is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// The fault-injection harness of this checkout.
std::string harness() {
  return test::sourceDir() + "/scripts/fault-injection.py";
}

test::ProgramRun trainTwoWorkers(const std::string& runDir, const std::string& checkpointDir,
                                 std::vector<std::string> more = {}) {
  return cli::checkpointedRun(runDir, checkpointDir, 2, more);
}

class RestartCli : public cli::TrainerTest {};

TEST_F(RestartCli, BadFlagsExit2) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--max-restarts", "2"}, "--max-restarts 2 needs --checkpoint-dir"},
      {{"--max-restarts", "-1"}, "--max-restarts must be an integer of at least 0"},
      {{"--np", "2", "--fault-at-step", "3", "--fault-rank", "2"},
       "--fault-rank 2 is not a rank of the 2 workers"},
      {{"--fault-at-step", "-3"}, "--fault-at-step must be an integer of at least 0"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {gyreTool(), "train"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const test::ProgramRun r = test::runProgram({argv, test::cleanEnvironment()}, cli::kTrainTimeout);
    EXPECT_EQ(r.exitCode, 2) << c.args.front() << ": " << r.describe();
    EXPECT_TRUE(contains(r.err, c.message)) << "expected '" << c.message << "' in:\n" << r.err;
  }
}

TEST_F(RestartCli, KilledWorkerIsRestartedAndTheRunEndsAsWithoutTheFault) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const test::ProgramRun clean = trainTwoWorkers(path("clean"), path("clean-ckpt"));
  ASSERT_EQ(clean.exitCode, 0) << clean.describe() << "\nstdout:\n" << clean.out;

  // Rank 1 dies by SIGKILL right after step 19 (epoch 2's 7th step); the newest checkpoint is
  // step 15's, so the restart loses steps 16 to 19. (Rank 0 writes checkpoints in the background:
  // should step 15's still be in flight when rank 0 is stopped, the restart resumes from step 10.)
  const test::ProgramRun faulty =
      trainTwoWorkers(path("faulty"), path("faulty-ckpt"),
                      {"--max-restarts", "1", "--fault-at-step", "19", "--fault-rank", "1"});
  const std::string all = faulty.out + faulty.err;
  ASSERT_EQ(faulty.exitCode, 0) << faulty.describe() << "\nstdout:\n" << faulty.out;
  const std::string injected =
      "injecting a fault: rank 1 kills itself (SIGKILL) after step 19; newest complete "
      "checkpoint: step ";
  ASSERT_TRUE(contains(all, injected)) << all;
  const int committed = std::stoi(all.substr(all.find(injected) + injected.size()));
  EXPECT_TRUE(committed == 15 || committed == 10) << committed;
  EXPECT_TRUE(contains(all, "was killed by SIGKILL")) << all;
  EXPECT_TRUE(contains(all, "restarting all 2 workers (restart 1 of 1)")) << all;
  EXPECT_TRUE(contains(faulty.out, "restart 1: resumed from " + path("faulty-ckpt") + "/ckpt-0000000000"))
      << faulty.out;
  EXPECT_TRUE(contains(all, "every worker succeeded in generation 1")) << all;

  // The story of the attempts: generation 0 got to step 18, generation 1 went on from 15.
  std::map<int, std::int64_t> start, last;
  for (const nlohmann::json& j : jsonLines(path("faulty") + "/progress.jsonl")) {
    const int g = j.at("generation").get<int>();
    if (j.contains("start_step")) start[g] = j.at("start_step").get<std::int64_t>();
    if (j.contains("step")) last[g] = std::max(last[g], j.at("step").get<std::int64_t>());
  }
  ASSERT_EQ(start.size(), 2u);
  EXPECT_EQ(start[0], 0);
  EXPECT_EQ(last[0], 19);
  EXPECT_GE(start[1], committed) << "a resume must never go back past a complete checkpoint";
  EXPECT_TRUE(start[1] == 15 || start[1] == 10) << start[1];
  EXPECT_LE(last[0] - start[1], 5 + 4) << "lost work: the interval, plus the steps of a write in flight";
  EXPECT_EQ(last[1], 24);

  // The restarted run trained exactly the steps of the clean one, bit for bit.
  const auto expected = jsonLines(path("clean") + "/steps.jsonl");
  const auto actual = jsonLines(path("faulty") + "/steps.jsonl");
  ASSERT_EQ(expected.size(), 24u);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(actual[i].dump(), expected[i].dump()) << "step " << i + 1;
}

TEST_F(RestartCli, FirstGenerationStillRefusesACheckpointDirectoryInUse) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const test::ProgramRun first = trainTwoWorkers(path("run"), path("ckpt"), {"--stop-at-step", "5"});
  ASSERT_EQ(first.exitCode, 0) << first.describe();
  // Restarts resume by themselves, but the first generation is a fresh start unless --resume.
  const test::ProgramRun again = trainTwoWorkers(path("run"), path("ckpt"), {"--max-restarts", "2"});
  EXPECT_EQ(again.exitCode, 2) << again.describe();
  EXPECT_TRUE(contains(again.err, "pass --resume")) << again.err;
}

TEST_F(RestartCli, HarnessPassesWithOneSeed) {
  if (!haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_TRUE(std::filesystem::exists(harness())) << harness();
  const test::ProgramRun r = test::runProgram({{"/usr/bin/python3",
                                                harness(),
                                                "--gyre",
                                                gyreTool(),
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
                                                "--checkpoint-every",
                                                "5",
                                                "--seeds",
                                                "3",
                                                "--mode",
                                                "internal",
                                                "--timeout",
                                                "300"},
                                               test::cleanEnvironment()},
                                              cli::kTrainTimeout);
  EXPECT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  EXPECT_TRUE(contains(r.out, "summary: 1 faults injected, 1 survived")) << r.out;
  EXPECT_TRUE(contains(r.out, "fault injection: ok")) << r.out;
}

}  // namespace
}  // namespace gyre::train
