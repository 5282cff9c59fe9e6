// gyre tune --slurm against a real Slurm: tests/slurm/cluster.sh starts munged, slurmctld and
// slurmd (Debian's packages) with every file in a temporary directory and every port on loopback;
// trials run as sbatch jobs, are followed with squeue and scontrol, and stopped with scancel; the
// daemons are stopped at the end and nothing of the cluster or its jobs is left. Skipped, saying
// why, only when the packages cannot be installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"
#include "support/slurm_cluster.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using Json = nlohmann::json;
constexpr auto kSlurmTimeout = std::chrono::seconds(180);

class TuneSlurm : public test::SlurmTest {
 protected:
  static test::ProgramRun tune(std::vector<std::string> args, const std::vector<std::string>& command) {
    args.insert(args.begin(), {test::gyreTool(), "tune", "--progress", "off", "--slurm"});
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return test::runProgram({args, env()}, kSlurmTimeout);
  }
  static Json summaryOf(const test::ProgramRun& run) {
    std::istringstream in(run.out);
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty() && line.front() == '{') last = line;
    return Json::parse(last, nullptr, false);
  }
};

TEST_F(TuneSlurm, TrialsRunAsSbatchJobsAndTheSchedulerStopsThemWithScancel) {
  const std::string exp = dir() + "/asha";
  const test::ProgramRun run = tune(
      {"--param", "x=grid:0.1,0.2,0.3,0.4,0.5,0.6", "--max-t", "9", "--scheduler", "asha-stop", "--slots",
       "2", "--metric", "score", "--json", "--dir", exp},
      {test::binDir() + "/gyre_tune_trial", "--x", "{x}", "--sleep-ms", "300", "--tag", exp + "/trialtag"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  const Json s = summaryOf(run);
  EXPECT_EQ(s.at("trials"), 6);
  EXPECT_EQ(s.at("errors"), 0);
  EXPECT_EQ(s.at("best_config"), (Json{{"x", 0.3}}));
  EXPECT_NE(run.out.find("slurm, 2 slots"), std::string::npos) << run.out;
  EXPECT_NE(test::readFile(exp + "/trials.csv").find("slurm job "), std::string::npos);
  EXPECT_NE(test::readFile(exp + "/trials/0/run.sbatch").find("export GYRE_TUNE_TRIAL_ID='0'"),
            std::string::npos);
  // Stopped early means scancel'ed: the jobs are gone from the queue, their trials from the host.
  EXPECT_GT(s.at("stopped_early"), 0) << run.out;
  EXPECT_EQ(squeue(), "");
  EXPECT_TRUE(test::processesWith(exp + "/trialtag").empty());
}

TEST_F(TuneSlurm, AFailedJobIsRetriedAndAnUnreachableSlurmIsAClearError) {
  const test::ProgramRun run = tune(
      {"--param", "x=grid:0.3", "--max-t", "4", "--metric", "score", "--json", "--dir", dir() + "/retry"},
      {test::binDir() + "/gyre_tune_trial", "--x", "{x}", "--fail-at", "2"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.out.find("trial 0 failed: run exited with code 3"), std::string::npos) << run.out;
  EXPECT_EQ(summaryOf(run).at("best_iteration"), 4);

  // A slurm.conf whose controller port nobody listens on.
  const std::string dead = dir() + "/dead.conf";
  std::string conf = test::readFile(SlurmTest::conf());
  const std::size_t at = conf.find("SlurmctldPort=");
  conf.replace(at, conf.find('\n', at) - at, "SlurmctldPort=1");
  { std::ofstream(dead) << conf; }
  test::Environment e = test::cleanEnvironment();
  e["SLURM_CONF"] = dead;
  const test::ProgramRun bad =
      test::runProgram({{test::gyreTool(), "tune", "--slurm", "--param", "x=grid:0.3", "--dir",
                         dir() + "/dead", "--", test::binDir() + "/gyre_tune_trial"},
                        e},
                       kSlurmTimeout);
  EXPECT_EQ(bad.exitCode, 1) << bad.describe();
  EXPECT_NE(bad.err.find("Slurm is not reachable: `'sinfo' '-h' '-o' '%P %C'` failed"), std::string::npos)
      << bad.err;
}

// The tuner SIGKILLed leaves its jobs queued (Slurm does not know it died); --resume cancels them
// before it starts anything and finishes the experiment.
TEST_F(TuneSlurm, ResumingAfterTheTunerWasKilledCancelsTheJobsItLeft) {
  const std::string exp = dir() + "/killed";
  const std::string script = test::gyreTool() + " tune --progress off --slurm --param x=grid:0.2,0.3 " +
                             "--max-t 20 --metric score --dir " + exp + " -- " + test::binDir() +
                             "/gyre_tune_trial --x {x} --sleep-ms 500 & pid=$!; while kill -0 $pid && " +
                             "[ \"$(cat " + exp +
                             "/results.jsonl 2>/dev/null | wc -l)\" -lt 2 ]; do sleep 0.05; " +
                             "done; kill -9 $pid; wait $pid; exit 0";
  test::Environment e = env();
  const test::ProgramRun killed = test::runProgram({{"/bin/sh", "-c", script}, e}, kSlurmTimeout);
  ASSERT_EQ(killed.exitCode, 0) << killed.describe();
  EXPECT_NE(squeue().find("gyre-tune-"), std::string::npos) << "the jobs should outlive the tuner";
  const test::ProgramRun resumed = test::runProgram(
      {{test::gyreTool(), "tune", "--progress", "off", "--slurm", "--resume", exp, "--json"}, e},
      kSlurmTimeout);
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe();
  EXPECT_NE(resumed.err.find("gyre tune: cancelling 2 Slurm jobs an earlier tuner of this experiment left"),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(summaryOf(resumed).at("best_iteration"), 20);
  EXPECT_EQ(squeue(), "");
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
