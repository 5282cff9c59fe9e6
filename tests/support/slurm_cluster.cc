#include "support/slurm_cluster.h"

namespace gyre::test {
namespace {

std::string clusterScript() {
  return sourceDir() + "/tests/slurm/cluster.sh";
}

}  // namespace

TempDir* SlurmTest::dir_ = nullptr;
std::string SlurmTest::conf_;
std::string SlurmTest::skip_;
std::string SlurmTest::failed_;
std::string SlurmTest::path_;

void SlurmTest::SetUpTestSuite() {
  dir_ = new TempDir();
  path_ = dir_->path();
  conf_.clear();
  skip_.clear();
  failed_.clear();
  const ProgramRun start =
      runProgram({{"/bin/bash", clusterScript(), "start", path_ + "/cluster"}, cleanEnvironment()},
                 std::chrono::seconds(300));
  if (start.exitCode == 77) {
    skip_ = "Slurm cannot be installed here: " + start.err;
  } else if (start.exitCode != 0) {
    failed_ = "tests/slurm/cluster.sh start " + start.describe();
  } else {
    conf_ = path_ + "/cluster/slurm.conf";
  }
}

void SlurmTest::TearDownTestSuite() {
  if (!conf_.empty())
    runProgram({{"/bin/bash", clusterScript(), "stop", path_ + "/cluster"}, cleanEnvironment()},
               std::chrono::seconds(60));
  delete dir_;
  dir_ = nullptr;
}

// A failure in SetUpTestSuite would show as a skip; so each test fails with it instead.
void SlurmTest::SetUp() {
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_TRUE(failed_.empty()) << failed_;
}

Environment SlurmTest::env() {
  Environment e = cleanEnvironment();
  e["SLURM_CONF"] = conf_;
  return e;
}

ProgramRun SlurmTest::slurm(const std::string& tool, std::vector<std::string> args,
                            std::chrono::seconds timeout) {
  std::vector<std::string> argv = {"/usr/bin/" + tool};
  argv.insert(argv.end(), args.begin(), args.end());
  return runProgram({argv, env()}, timeout);
}

std::string SlurmTest::squeue() {
  return slurm("squeue", {"-h", "-o", "%i %j %T"}, std::chrono::seconds(30)).out;
}

std::string SlurmTest::dir() {
  return path_;
}

std::string SlurmTest::conf() {
  return conf_;
}

}  // namespace gyre::test
