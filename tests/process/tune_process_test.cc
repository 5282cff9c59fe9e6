// `gyre tune` end to end, with gyre_tune_trial (tests/programs/) as the trial: every scheduler
// runs, ASHA finds grid search's best with a third of its compute, failed runs are retried from
// their checkpoint, a trial that always fails ends as ERROR while the experiment goes on, the tuner
// SIGKILLed mid-experiment and resumed loses no finished trial and no result, and bad input stops
// the experiment before any trial with a message. Built-in gyre train trials are tested in
// tests/train (they need the trainer).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using Json = nlohmann::json;

const std::vector<std::string> kGrid = {"--param", "x=grid:0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9", "--param",
                                        "y=grid:0,2,4"};

std::string trialProgram() {
  return test::binDir() + "/gyre_tune_trial";
}

test::ProgramRun tune(std::vector<std::string> args, const std::vector<std::string>& command = {}) {
  args.insert(args.begin(), {test::gyreTool(), "tune", "--progress", "off"});
  if (!command.empty()) {
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
  }
  return test::runProgram({args, test::cleanEnvironment()}, test::kJobTimeout);
}

// The summary line that --json prints last.
Json summaryOf(const test::ProgramRun& run) {
  std::istringstream in(run.out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line.front() == '{') last = line;
  return Json::parse(last, nullptr, false);
}

// (trial, iteration) -> score from results.jsonl; fails the test on a duplicate.
std::map<std::pair<int, int>, double> resultsOf(const std::string& dir) {
  std::map<std::pair<int, int>, double> results;
  std::istringstream in(test::readFile(dir + "/results.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    const auto key = std::make_pair(j.at("trial").get<int>(), j.at("iteration").get<int>());
    EXPECT_EQ(results.count(key), 0u) << "twice: " << line;
    results[key] = j.at("metric").get<double>();
  }
  return results;
}

TEST(GyreTune, AshaFindsTheGridsBestWithAThirdOfItsCompute) {
  test::TempDir dir;
  const std::vector<std::string> trial = {trialProgram(), "--x", "{x}", "--y", "{y}"};
  std::vector<std::string> common = kGrid;
  for (const char* a : {"--max-t", "9", "--slots", "2", "--metric", "score", "--json"}) common.push_back(a);
  std::vector<std::string> grid = common;
  grid.insert(grid.end(), {"--dir", dir.path() + "/grid"});
  std::vector<std::string> asha = common;
  asha.insert(asha.end(), {"--scheduler", "asha", "--eta", "3", "--dir", dir.path() + "/asha"});
  const test::ProgramRun g = tune(grid, trial);
  const test::ProgramRun a = tune(asha, trial);
  ASSERT_EQ(g.exitCode, 0) << g.describe();
  ASSERT_EQ(a.exitCode, 0) << a.describe();
  const Json gs = summaryOf(g), as = summaryOf(a);
  EXPECT_EQ(gs.at("worker_iterations"), 243);
  EXPECT_LE(as.at("worker_iterations").get<double>(), 243.0 / 3) << a.out;
  EXPECT_EQ(as.at("best_config"), gs.at("best_config"));
  EXPECT_DOUBLE_EQ(as.at("best_score").get<double>(), gs.at("best_score").get<double>());
  EXPECT_EQ(as.at("best_config"), (Json{{"x", 0.3}, {"y", 2}}));
  EXPECT_EQ(resultsOf(dir.path() + "/grid").size(), 243u);
  // The plots: curves, curves against time, one per numeric parameter, all inline in index.html.
  const std::string index = test::readFile(dir.path() + "/asha/index.html");
  int svgs = 0;
  for (auto at = index.find("<svg"); at != std::string::npos; at = index.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 4);
  EXPECT_NE(index.find("score 0.9444 (x=0.3, y=2)"), std::string::npos);
  for (const char* svg : {"curves.svg", "curves-time.svg", "search-x.svg", "search-y.svg"})
    EXPECT_NE(test::readFile(dir.path() + "/asha/" + svg).find("</svg>"), std::string::npos) << svg;
  // trials.csv: a header and a row per trial.
  const std::string csv = test::readFile(dir.path() + "/asha/trials.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 28) << csv;
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "trial_id,status,x,y,iteration,last_score,best_score,failures,stopped_early,worker_iterations,"
            "busy_slot_s,node,error");
}

TEST(GyreTune, EverySchedulerRunsToTheEnd) {
  for (const std::string scheduler : {"fifo", "asha-stop", "hyperband", "median", "pbt"}) {
    test::TempDir dir;
    const test::ProgramRun run = tune({"--param",     "x=uniform:0:1",
                                       "--param",     "y=choice:0,2,4",
                                       "--samples",   "12",
                                       "--max-t",     "9",
                                       "--scheduler", scheduler,
                                       "--slots",     "2",
                                       "--metric",    "loss",
                                       "--mode",      "min",
                                       "--seed",      "3",
                                       "--json",      "--dir",
                                       dir.path()},
                                      {trialProgram(), "--x", "{x}", "--y", "{y}"});
    ASSERT_EQ(run.exitCode, 0) << scheduler << ": " << run.describe();
    const Json s = summaryOf(run);
    EXPECT_EQ(s.at("trials"), 12) << scheduler;
    EXPECT_EQ(s.at("errors"), 0) << scheduler;
    EXPECT_LT(s.at("best_loss").get<double>(), 0.5) << scheduler;
    if (scheduler != "fifo" && scheduler != "pbt") {
      EXPECT_GT(s.at("stopped_early"), 0) << scheduler;
    }
    if (scheduler == "pbt") {
      // Lineage: some trial took another's checkpoint, and the run resumed from it.
      const std::string state = test::readFile(dir.path() + "/state.json");
      EXPECT_NE(state.find("\"source\""), std::string::npos) << run.out;
      EXPECT_NE(run.out.find("exploits trial"), std::string::npos) << run.out;
    }
  }
}

TEST(GyreTune, AFailedRunIsRetriedFromItsCheckpointAndAnAlwaysFailingTrialIsAnError) {
  test::TempDir dir;
  const test::ProgramRun run = tune({"--param", "x=grid:0.3", "--max-t", "6", "--metric", "score",
                                     "--max-failures", "1", "--json", "--dir", dir.path() + "/a"},
                                    {trialProgram(), "--x", "{x}", "--fail-at", "4"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.out.find("trial 0 failed: run exited with code 3 (gyre_tune_trial: failing at iteration 4); "
                         "retrying from iteration 4 (1 of 1)"),
            std::string::npos)
      << run.out;
  const auto results = resultsOf(dir.path() + "/a");
  EXPECT_EQ(results.size(), 6u);
  EXPECT_EQ(summaryOf(run).at("errors"), 0);

  const test::ProgramRun bad =
      tune({"--param", "x=grid:0.3,0.5", "--max-t", "3", "--metric", "score", "--max-failures", "1", "--json",
            "--dir", dir.path() + "/b"},
           {"/bin/sh", "-c", "[ {x} = 0.5 ] && exit 9; exec " + trialProgram() + " --x {x}"});
  ASSERT_EQ(bad.exitCode, 0) << bad.describe();
  const Json s = summaryOf(bad);
  EXPECT_EQ(s.at("errors"), 1);
  EXPECT_EQ(s.at("best_config"), (Json{{"x", 0.3}}));
  EXPECT_NE(bad.out.find("trial 1 ERROR after 2 failures: run exited with code 9"), std::string::npos)
      << bad.out;
  EXPECT_NE(test::readFile(dir.path() + "/b/trials.csv").find("1,ERROR,0.5"), std::string::npos);
}

TEST(GyreTune, TheTunerKilledMidExperimentResumesWithoutLosingAResult) {
  test::TempDir dir;
  const std::string exp = dir.path() + "/exp";
  // ASHA on 6 trials makes 10 results or more: 6 at rung 1, then at least the top 2 go on to
  // rung 3. The tuner is SIGKILLed once results.jsonl holds 6; its trials die with it.
  const std::string results = exp + "/results.jsonl";
  const std::string script =
      test::gyreTool() + " tune --progress off --param x=grid:0.1,0.2,0.3,0.4,0.5,0.6 " +
      "--max-t 9 --scheduler asha --slots 2 --metric score --dir " + exp + " -- " + trialProgram() +
      " --x {x} --sleep-ms 40 --tag " + exp + "/trialtag & pid=$!; while kill -0 $pid && " + "[ \"$(cat " +
      results + " 2>/dev/null | wc -l)\" -lt 6 ]; do sleep 0.02; done; " +
      "kill -9 $pid && wait $pid; [ $? = 137 ]";
  const test::ProgramRun killed =
      test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, test::kJobTimeout);
  ASSERT_EQ(killed.exitCode, 0) << killed.describe();
  const auto before = resultsOf(exp);
  ASSERT_GE(before.size(), 6u);
  ASSERT_LT(before.size(), 10u) << "the tuner finished before it was killed";
  // Its trials got SIGKILL with it (PR_SET_PDEATHSIG): gone within moments.
  std::vector<std::string> left = test::processesWith(exp + "/trialtag");
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = test::processesWith(exp + "/trialtag");
  }
  EXPECT_TRUE(left.empty()) << "a trial outlived the tuner: " << left.front();

  const test::ProgramRun resumed = tune({"--resume", exp, "--slots", "2", "--json"});
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe();
  const auto after = resultsOf(exp);
  for (const auto& [key, score] : before) {
    ASSERT_EQ(after.count(key), 1u) << "lost trial " << key.first << " iteration " << key.second;
    EXPECT_DOUBLE_EQ(after.at(key), score);
  }
  const Json s = summaryOf(resumed);
  EXPECT_EQ(s.at("trials"), 6);
  EXPECT_EQ(s.at("best_config"), (Json{{"x", 0.3}}));
  // How far ASHA got depends on the order results arrived in (a trial promoted early stays
  // promoted): at least the top two to rung 3.
  EXPECT_GE(s.at("best_iteration"), 3);
  EXPECT_GE(after.size(), 10u);
  EXPECT_EQ(s.at("terminated"), 6);
  // A finished experiment has nothing left to run.
  const test::ProgramRun again = tune({"--resume", exp, "--json"});
  ASSERT_EQ(again.exitCode, 0) << again.describe();
  EXPECT_EQ(resultsOf(exp).size(), after.size());
}

TEST(GyreTune, BadInputStopsTheExperimentBeforeAnyTrialWithAMessage) {
  test::TempDir dir;
  auto errorOf = [&](std::vector<std::string> args, const std::vector<std::string>& command, int code) {
    args.insert(args.end(), {"--dir", dir.path() + "/x"});
    const test::ProgramRun run = tune(args, command);
    EXPECT_EQ(run.exitCode, code) << run.describe();
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/x/trials/0")) << "a trial started";
    return run.err;
  };
  const std::vector<std::string> trial = {trialProgram(), "--x", "{x}"};
  EXPECT_NE(errorOf({"--param", "x=normal:0:1"}, trial, 2).find("--param x: unknown distribution \"normal\""),
            std::string::npos);
  EXPECT_NE(errorOf({"--param", "x=uniform:1:0"}, trial, 2).find("LOW 1 is above HIGH 0"), std::string::npos);
  EXPECT_NE(errorOf({"--param", "x=uniform:0:1"}, {"/nonexistent/prog", "{x}"}, 2)
                .find("the trial command /nonexistent/prog is not found"),
            std::string::npos);
  EXPECT_NE(errorOf({}, trial, 2).find("give the search space"), std::string::npos);
  EXPECT_NE(
      errorOf({"--param", "x=uniform:0:1", "--scheduler", "bohb"}, trial, 2).find("unknown --scheduler bohb"),
      std::string::npos);
  // A metric that no trial reports: an error after the first report, not "best = none". One slot:
  // trials run one at a time, so trial 0's report is the first.
  const test::ProgramRun run =
      tune({"--param", "x=grid:0.3,0.4", "--metric", "accuracy", "--slots", "1", "--dir", dir.path() + "/m"},
           {trialProgram(), "--x", "{x}", "--iterations", "3"});
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_NE(run.err.find(
                "--metric accuracy: trial 0's first report has no such number (it has: loss, mean, score)"),
            std::string::npos)
      << run.err;
  // --resume of a directory without an experiment says what it looked for.
  const test::ProgramRun none = tune({"--resume", dir.path() + "/nothing"});
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_NE(none.err.find("no experiment there (looked for " + dir.path() + "/nothing/experiment.json)"),
            std::string::npos)
      << none.err;
}

TEST(GyreTune, TpeSearchesAndAnInterruptedTunerStopsItsTrialsAndResumes) {
  test::TempDir dir;
  const std::string exp = dir.path() + "/tpe";
  // SIGINT once 4 results are in: the tuner stops every run, says how to resume, exits 130.
  const std::string script =
      test::gyreTool() + " tune --progress off --search tpe --tpe-startup 4 " +
      "--param x=uniform:0:1 --param y=quniform:0:4:1 --samples 16 --max-t 3 --slots 2 " +
      "--metric score --json --dir " + exp + " -- " + trialProgram() +
      " --x {x} --y {y} --sleep-ms 60 --tag " + exp + "/trialtag & pid=$!; while kill -0 $pid && " +
      "[ \"$(cat " + exp + "/results.jsonl 2>/dev/null | wc -l)\" -lt 4 ]; do sleep 0.02; " +
      "done; kill -INT $pid; wait $pid; echo \"exit $?\"";
  const test::ProgramRun interrupted =
      test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_NE(interrupted.out.find("exit 130"), std::string::npos) << interrupted.describe();
  EXPECT_NE(interrupted.err.find("gyre tune --resume " + exp + "` finishes the experiment"),
            std::string::npos)
      << interrupted.err;
  EXPECT_TRUE(test::processesWith(exp + "/trialtag").empty());
  const test::ProgramRun resumed = tune({"--resume", exp, "--json"});
  ASSERT_EQ(resumed.exitCode, 0) << resumed.describe();
  const Json s = summaryOf(resumed);
  EXPECT_EQ(s.at("trials"), 16);
  EXPECT_EQ(resultsOf(exp).size(), 48u);
  // The search got near the optimum (x = 0.3, y = 2: 0.833 at iteration 3). Which results TPE
  // has seen when it proposes depends on the interrupt's timing, so this bound is loose (random
  // search alone misses it 1.3% of the time, TPE far less; CI once saw 0.793 against 0.8); how
  // closely TPE concentrates is checked deterministically in TuneSearch.TpeConcentratesNearTheBest.
  EXPECT_GT(s.at("best_score").get<double>(), 0.7) << resumed.out;
}

// -H: trials run on "hosts" reached through an --rsh-agent that runs the command here, through
// gyre run's agents; each host holds at most its slots, and every trial reports.
TEST(GyreTune, TrialsRunOnHostsThroughGyreRun) {
  test::TempDir dir;
  const std::string rsh = test::fakeRsh(dir);
  const test::ProgramRun run =
      tune({"--param", "x=grid:0.1,0.2,0.3,0.4,0.5", "--max-t", "3", "--metric", "score", "-H",
            "hostA:2,hostB:1", "--rsh-agent", rsh, "--np", "1", "--json", "--dir", dir.path() + "/exp"},
           {trialProgram(), "--x", "{x}", "--sleep-ms", "50"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(resultsOf(dir.path() + "/exp").size(), 15u);
  const std::string csv = test::readFile(dir.path() + "/exp/trials.csv");
  EXPECT_NE(csv.find(",hostA,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",hostB,"), std::string::npos) << csv;
  EXPECT_NE(run.out.find("hosts hostA:2,hostB:1"), std::string::npos) << run.out;
}

// A thousand trials (300 in the sanitizer builds, GYRE_TEST_QUICK=1, where each costs 3 times as
// much and the scheduler's scale is not what is checked).
TEST(GyreTune, AThousandNoOpTrialsFinish) {
  const char* quick = std::getenv("GYRE_TEST_QUICK");
  const int samples = quick != nullptr && std::string(quick) == "1" ? 300 : 1000;
  test::TempDir dir;
  const test::ProgramRun run = tune(
      {"--param", "x=uniform:0:1", "--samples", std::to_string(samples), "--slots", "2", "--json", "--dir", dir.path()},
      {"/bin/true"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(summaryOf(run).at("terminated"), samples);
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
