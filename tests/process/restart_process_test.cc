// `gyre run --max-restarts`: a failed or SIGKILLed worker makes the launcher stop the rest and
// start a new generation of every worker with a fresh rendezvous (its own store address and
// secret, the same job id), which forms a new communicator and runs a collective; after K
// restarts it gives up with the last failure's exit code and one line per generation; 0 restarts
// is the behaviour without the flag; bad values are refused; Ctrl-C during a restart and
// --timeout stop the job across generations, leaving nothing behind. Workers are
// gyre_restart_check (tests/programs/) or shell scripts; "remote" hosts are reached through an
// --rsh-agent that runs the command here, which exercises the agents.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using test::fakeRsh;
using test::processesWith;
using test::ProgramRun;
using test::readFile;
using test::uniqueSleep;

using test::gyreRun;

std::string restartCheck() {
  return test::binDir() + "/gyre_restart_check";
}

int countOf(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// What gyre_restart_check wrote: generation -> rank -> its line, split into words.
struct Seen {
  int maxRestarts = -1;
  int rank = -1, size = -1;
  std::string store, secret, job;
};

std::map<int, std::map<int, Seen>> seenByWorkers(const test::TempDir& dir) {
  std::map<int, std::map<int, Seen>> seen;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    int generation = -1, rank = -1;
    if (std::sscanf(name.c_str(), "gen.%d.rank.%d", &generation, &rank) != 2) continue;
    std::istringstream line(readFile(entry.path().string()));
    std::string w[20];
    for (auto& word : w) line >> word;
    // generation G of max M rank R of N store S secret F job J sum ok
    EXPECT_EQ(w[0] + w[2] + w[3] + w[5] + w[7] + w[9] + w[11] + w[13] + w[15] + w[16],
              "generationofmaxrankofstoresecretjobsumok")
        << name;
    EXPECT_EQ(std::stoi(w[1]), generation) << name;
    Seen s;
    s.maxRestarts = std::stoi(w[4]);
    s.rank = std::stoi(w[6]);
    s.size = std::stoi(w[8]);
    s.store = w[10];
    s.secret = w[12];
    s.job = w[14];
    EXPECT_EQ(s.rank, rank) << name;
    seen[generation][rank] = s;
  }
  return seen;
}

// Every generation in `generations` was seen by all `size` ranks, each generation with its own
// store address and secret, and all with the same job id.
void expectFreshRendezvousPerGeneration(const std::map<int, std::map<int, Seen>>& seen, int generations,
                                        int size, int maxRestarts) {
  ASSERT_EQ(static_cast<int>(seen.size()), generations);
  std::set<std::string> stores, secrets, jobs;
  for (const auto& [generation, ranks] : seen) {
    ASSERT_EQ(static_cast<int>(ranks.size()), size) << "generation " << generation;
    for (const auto& [rank, s] : ranks) {
      EXPECT_EQ(s.size, size);
      EXPECT_EQ(s.maxRestarts, maxRestarts);
      EXPECT_EQ(s.store, ranks.begin()->second.store) << "generation " << generation << " rank " << rank;
      EXPECT_EQ(s.secret, ranks.begin()->second.secret) << "generation " << generation << " rank " << rank;
      jobs.insert(s.job);
    }
    stores.insert(ranks.begin()->second.store);
    secrets.insert(ranks.begin()->second.secret);
  }
  EXPECT_EQ(static_cast<int>(stores.size()), generations) << "a store was used by two generations";
  EXPECT_EQ(static_cast<int>(secrets.size()), generations) << "a secret was used by two generations";
  EXPECT_EQ(jobs.size(), 1u) << "the job id changed between generations";
}

TEST(GyreRunRestarts, SucceedsAfterRestartsWithAFreshRendezvousPerGeneration) {
  test::TempDir dir;
  // Rank 1 exits 3 in generations 0 and 1, after the allreduce; generation 2 succeeds.
  const ProgramRun run =
      gyreRun({"-np", "3", "--max-restarts", "3", "--", restartCheck(), dir.path(), "1", "2", "exit3"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  for (int restart : {1, 2}) {
    const std::string line = "\ngyre run: rank 1 on host localhost exited with code 3 after ";
    const std::string tail = " s; restarting all 3 workers (restart " + std::to_string(restart) + " of 3)\n";
    EXPECT_NE(("\n" + run.err).find(tail), std::string::npos) << run.err;
    EXPECT_EQ(countOf("\n" + run.err, line), 2) << run.err;
  }
  EXPECT_EQ(countOf(run.err, "restarting"), 2) << run.err;
  EXPECT_NE(
      run.err.find("gyre run: every worker succeeded in generation 2, after 2 restarts (--max-restarts 3)\n"),
      std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("giving up"), std::string::npos) << run.err;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(run.out.find("[" + std::to_string(r) + "]<stdout>:generation 2 rank " + std::to_string(r) +
                           " of 3 ok"),
              std::string::npos)
        << run.out;
  expectFreshRendezvousPerGeneration(seenByWorkers(dir), 3, 3, 3);
}

TEST(GyreRunRestarts, GivesUpAfterMaxRestartsWithTheLastFailuresCodeAndEveryGeneration) {
  test::TempDir dir;
  const std::string logs = dir.path() + "/logs";
  const ProgramRun run = gyreRun({"-np", "2", "--max-restarts", "2", "--output-dir", logs, "--",
                                  restartCheck(), dir.path(), "1", "99", "exit5"});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 5) << run.describe();
  EXPECT_EQ(countOf(run.err, "; restarting all 2 workers (restart "), 2) << run.err;
  EXPECT_NE(run.err.find("(restart 2 of 2)\n"), std::string::npos) << run.err;
  // The last failure as without restarts, then the story.
  const auto last = run.err.find("gyre run: rank 1 on host localhost exited with code 5 after ");
  ASSERT_NE(last, std::string::npos) << run.err;
  const auto story = run.err.find(
      "gyre run: giving up after 2 restarts (--max-restarts 2); what each generation did:\n"
      "gyre run:   generation 0: rank 1 on host localhost exited with code 5 after ");
  ASSERT_NE(story, std::string::npos) << run.err;
  EXPECT_LT(run.err.rfind("restarting"), story) << run.err;
  for (int g : {1, 2})
    EXPECT_NE(run.err.find("gyre run:   generation " + std::to_string(g) +
                           ": rank 1 on host localhost exited with code 5 after "),
              std::string::npos)
        << run.err;
  EXPECT_EQ(run.err.find("generation 3"), std::string::npos) << run.err;
  expectFreshRendezvousPerGeneration(seenByWorkers(dir), 3, 2, 2);
  // Each rank's log holds every generation, with a line where each restart began.
  const std::string log = readFile(logs + "/rank.1.log");
  EXPECT_NE(log.find("generation 0 rank 1 of 2 ok\ngeneration 0 rank 1 fails (exit5)\n"
                     "--- gyre run: restart 1 ---\ngeneration 1 rank 1 of 2 ok\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("--- gyre run: restart 2 ---\ngeneration 2 rank 1 of 2 ok\n"), std::string::npos) << log;
}

TEST(GyreRunRestarts, AKilledWorkerIsRestarted) {
  test::TempDir dir;
  const ProgramRun run =
      gyreRun({"-np", "2", "--max-restarts", "1", "--", restartCheck(), dir.path(), "0", "1", "kill"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.err.find("gyre run: rank 0 on host localhost was killed by SIGKILL (Killed) after "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find(" s; restarting all 2 workers (restart 1 of 1)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("every worker succeeded in generation 1, after 1 restart (--max-restarts 1)"),
            std::string::npos)
      << run.err;
  expectFreshRendezvousPerGeneration(seenByWorkers(dir), 2, 2, 1);
}

TEST(GyreRunRestarts, RestartsEveryHostThroughTheAgents) {
  // Two "hosts" through the rsh agent: rank 2, alone on hostB, is killed in generation 0; both
  // agents are replaced and the new generation meets at a new store, shm inside and tcp across.
  test::TempDir dir;
  const ProgramRun run =
      gyreRun({"-H", "hostA:2,hostB:1", "--rsh-agent", fakeRsh(dir), "--network-interface", "lo",
               "--max-restarts", "2", "--", restartCheck(), dir.path(), "2", "1", "kill"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.err.find("gyre run: rank 2 on host hostB was killed by SIGKILL (Killed) after "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("; restarting all 3 workers (restart 1 of 2)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("every worker succeeded in generation 1, after 1 restart"), std::string::npos)
      << run.err;
  expectFreshRendezvousPerGeneration(seenByWorkers(dir), 2, 3, 2);
}

TEST(GyreRunRestarts, ZeroRestartsIsTheBehaviourWithoutTheFlag) {
  for (const std::vector<std::string>& flag :
       {std::vector<std::string>{"--max-restarts", "0"}, std::vector<std::string>{}}) {
    test::TempDir dir;
    std::vector<std::string> args = {"-np", "2"};
    args.insert(args.end(), flag.begin(), flag.end());
    args.insert(args.end(), {"--", restartCheck(), dir.path(), "1", "99", "exit3"});
    const ProgramRun run = gyreRun(args);
    EXPECT_FALSE(run.timedOut);
    EXPECT_EQ(run.exitCode, 3) << run.describe();
    EXPECT_EQ(run.err.find("gyre run: rank 1 on host localhost exited with code 3 after "), 0u) << run.err;
    EXPECT_EQ(run.err.find("restarting"), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("generation 0:"), std::string::npos) << run.err;
    const auto seen = seenByWorkers(dir);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen.begin()->first, 0);
    EXPECT_EQ(seen.begin()->second.begin()->second.maxRestarts, 0);
  }
}

TEST(GyreRunRestarts, BadValuesAreRefusedAndTheKnobSetsIt) {
  for (const char* bad : {"-1", "x", "1.5", "3x"}) {
    const ProgramRun run = gyreRun({"-np", "1", "--max-restarts", bad, "--", "/bin/true"});
    EXPECT_EQ(run.exitCode, 2) << bad << ": " << run.describe();
    EXPECT_NE(run.err.find("--max-restarts"), std::string::npos) << bad << ": " << run.err;
  }
  EXPECT_NE(gyreRun({"-np", "1", "--max-restarts", "-1", "--", "/bin/true"})
                .err.find("--max-restarts must be an integer in [0, 1048576]"),
            std::string::npos);
  auto env = test::cleanEnvironment();
  env["GYRE_MAX_RESTARTS"] = "many";
  ProgramRun run = gyreRun({"-np", "1", "--", "/bin/true"}, env);
  EXPECT_EQ(run.exitCode, 2) << run.describe();

  // GYRE_MAX_RESTARTS is the flag's default.
  test::TempDir dir;
  env["GYRE_MAX_RESTARTS"] = "1";
  run = gyreRun({"-np", "2", "--", restartCheck(), dir.path(), "1", "1", "exit3"}, env);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.err.find("(restart 1 of 1)"), std::string::npos) << run.err;
  expectFreshRendezvousPerGeneration(seenByWorkers(dir), 2, 2, 1);
}

TEST(GyreRunRestarts, AFailureThatWouldRecurIsNotRestarted) {
  // A program that cannot be found fails every generation the same way: no restart.
  const ProgramRun run = gyreRun({"-np", "2", "--max-restarts", "3", "--", "/nonexistent/program"});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_NE(run.err.find("cannot find the program '/nonexistent/program'"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("restarting"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("generation 0:"), std::string::npos) << run.err;
}

// The shell starts `gyre run ARGS` in the background, waits (at most a minute) for every file of
// `ready` to exist, sends SIGINT and reports the launcher's exit status.
ProgramRun interruptWhenReady(const std::vector<std::string>& args, const std::vector<std::string>& ready) {
  std::string script = test::gyreTool() + " run";
  for (const auto& a : args) script += " '" + a + "'";
  script += " & pid=$!\nfor i in $(seq 1200); do ";
  for (const auto& file : ready) script += "[ -e " + file + " ] && ";
  script += "break; sleep 0.05; done\nkill -INT $pid; wait $pid; echo \"launcher exit $?\"\n";
  return test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, test::kJobTimeout);
}

TEST(GyreRunRestarts, CtrlCWhileTheNextGenerationStartsStopsEverything) {
  // Generation 0 fails; generation 1's agents never start (the rsh agent holds them): Ctrl-C then
  // stops the job instead of waiting for them, and nothing is left.
  test::TempDir dir;
  const std::string sleep = uniqueSleep();
  const ProgramRun run = interruptWhenReady(
      {"-H", "hostA:1,hostB:1", "--rsh-agent", fakeRsh(dir, 2, sleep), "--network-interface", "lo",
       "--max-restarts", "5", "--", restartCheck(), dir.path(), "1", "99", "exit3"},
      {dir.path() + "/held"});
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_NE(run.out.find("launcher exit 130"), std::string::npos) << run.out << run.describe();
  EXPECT_NE(run.err.find("(restart 1 of 5)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("gyre run: interrupted by SIGINT (Interrupt); stopped every worker\n"
                         "gyre run: stopped in generation 1, after 1 restart; what each generation did:\n"
                         "gyre run:   generation 0: rank 1 on host hostB exited with code 3 after "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("gyre run:   generation 1: stopped by SIGINT (Interrupt)\n"), std::string::npos)
      << run.err;
  EXPECT_EQ(seenByWorkers(dir).count(1), 0u);
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRunRestarts, CtrlCDuringARestartedGenerationStopsEveryWorker) {
  // Shell workers: rank 1 fails in generation 0; in generation 1 every rank says it started and
  // sleeps until Ctrl-C.
  test::TempDir dir;
  const std::string sleep = uniqueSleep();
  const ProgramRun run =
      interruptWhenReady({"-np", "2", "--max-restarts", "3", "--", "/bin/sh", "-c",
                          "if [ $GYRE_RESTART_COUNT = 0 ] && [ $GYRE_RANK = 1 ]; then exit 3; fi; "
                          "if [ $GYRE_RESTART_COUNT = 1 ]; then touch " +
                              dir.path() + "/gen1.$GYRE_RANK; fi; exec sleep " + sleep},
                         {dir.path() + "/gen1.0", dir.path() + "/gen1.1"});
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_NE(run.out.find("launcher exit 130"), std::string::npos) << run.out << run.describe();
  EXPECT_NE(run.err.find("; restarting all 2 workers (restart 1 of 3)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("gyre run:   generation 1: stopped by SIGINT (Interrupt)\n"), std::string::npos)
      << run.err;
  EXPECT_EQ(countOf(run.err, "restarting"), 1) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRunRestarts, TheTimeoutBoundsEveryGenerationTogether) {
  // Every generation fails after a short while and a thousand restarts are allowed: only a
  // --timeout that spans generations ends the job (long before the test's own time-out).
  const ProgramRun run = gyreRun({"-np", "2", "--max-restarts", "1000", "--timeout", "2", "--", "/bin/sh",
                                  "-c", "sleep 0.2; [ $GYRE_RANK = 1 ] && exit 3; exec sleep 30"});
  EXPECT_FALSE(run.timedOut) << run.describe();
  // 124, or rank 1's code when the time-out came while its failure was being weighed; either way
  // the time-out is named and ends the job.
  EXPECT_TRUE(run.exitCode == 124 || run.exitCode == 3) << run.describe();
  EXPECT_NE(
      run.err.find(run.exitCode == 124 ? "gyre run: the job ran past --timeout 2.0 s; stopped it\n"
                                       : "gyre run: the job ran past --timeout 2.0 s; not restarting\n"),
      std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("restart 1000 of"), std::string::npos) << run.err;
}

#else
TEST(GyreRunRestarts, NeedsTheTool) {
  GTEST_SKIP() << "the gyre tool is not built (GYRE_BUILD_APPS=OFF)";
}
#endif

}  // namespace
}  // namespace gyre
