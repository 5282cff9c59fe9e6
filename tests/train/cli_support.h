// What the tests that run `gyre train` as a user does share: where the programs are, whether
// this build and machine can run them, and reading the files a run writes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre::train::cli {

using test::contains;
using test::gyreTool;       // bin/gyre
std::string trainWorker();  // bin/gyre_train_worker
// Both programs are built (a build without libtorch has no worker).
bool haveTrainer();
// Debian's dataset-fashion-mnist is installed.
bool haveData();

// The non-empty lines of a file, as text or parsed as JSON.
std::vector<std::string> lines(const std::string& path);
std::vector<nlohmann::json> jsonLines(const std::string& path);

// How long a test gives one `gyre train` before it kills it and fails.
inline constexpr std::chrono::seconds kTrainTimeout{600};

// `gyre train ARGS` with exactly `env` as its environment (the test's own GYRE_* variables do
// not reach it), killed after kTrainTimeout.
test::ProgramRun gyreTrain(std::vector<std::string> args, test::Environment env = test::cleanEnvironment());

// A job of `gyre train` with a short mlp run every checkpoint test uses: 2 epochs of 12 steps of
// `batch` samples, 1 thread, no evaluation, a cosine schedule (the rate changes at every step,
// so a resume at the wrong step would show), a checkpoint every 5 steps; then `more`. The test's
// own GYRE_* variables do not reach it.
test::ProgramRun checkpointedRun(const std::string& runDir, const std::string& checkpointDir, int np,
                                 const std::vector<std::string>& more, const std::string& batch = "64");

// A test that runs the trainer in a temporary directory; skipped in a build without it.
class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveTrainer()) GTEST_SKIP() << "no gyre_train_worker in this build";
  }
  test::TempDir dir_;
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
};

}  // namespace gyre::train::cli
