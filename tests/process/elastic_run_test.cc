// `gyre run --elastic`: a killed worker leaves the membership and the job goes on; a replacement
// (--max-restarts) joins with a fresh id; below --min-np past --elastic-timeout the launcher
// gives up (exit 1, no hang); a discovery script adds and removes slots; --timeout stops it;
// usage errors exit 2; a member that stops answering is stopped. Workers are gyre_elastic_member
// (tests/programs/), which speaks the elastic store protocol itself, and gyre_elastic_counter,
// which trains with the gyre::elastic library.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

using test::ProgramRun;
using test::readFile;

using test::contains;
using test::gyreRun;

std::string member() {
  return test::binDir() + "/gyre_elastic_member";
}

// Waits (at most a minute) until the file holds `part`.
bool waitFor(const std::string& path, const std::string& part) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if (contains(readFile(path), part)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Replaces the file at once, so that a script reading it never sees half of it.
void writeAtomically(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path + ".new") << text;
  ::chmod((path + ".new").c_str(), mode);
  std::filesystem::rename(path + ".new", path);
}

// A discovery script that prints DIR/hosts, which the test rewrites.
std::string discoveryScript(const test::TempDir& dir, const std::string& hosts) {
  writeAtomically(dir.path() + "/hosts", hosts);
  const std::string path = dir.path() + "/discover.sh";
  writeAtomically(path, "#!/bin/sh\ncat " + dir.path() + "/hosts\n", 0755);
  return path;
}

TEST(GyreRunElastic, AKilledWorkerLeavesTheMembershipAndTheJobGoesOn) {
  test::TempDir dir;
  const ProgramRun run = gyreRun({"--elastic", "-np", "2", "--min-np", "1", "--max-np", "2", "--", member(),
                                  dir.path(), "--done-at-epoch", "2", "--kill", "1@0.3"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 1 rank 0 size 2\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[1]<stdout>:member 1 epoch 1 rank 1 size 2\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 2 rank 0 size 1\n")) << run.out;
  EXPECT_TRUE(contains(run.err, "gyre run: worker 1 on host localhost was killed by SIGKILL (Killed) after "))
      << run.err;
  EXPECT_TRUE(contains(run.err, " s; continuing with 1 worker (elastic: --min-np 1)\n")) << run.err;
  EXPECT_TRUE(contains(run.err, "gyre run: elastic epoch 2: workers 0\n")) << run.err;
  EXPECT_TRUE(contains(run.err,
                       "gyre run: every worker finished; the elastic job went on past 1 failure(s) "
                       "(2 membership(s), 0 replacement(s) of --max-restarts 0)\n"))
      << run.err;
  // What each worker got: its id as its rank, the limits, and a share of the cores.
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int threads = std::max(1, CPU_COUNT(&set) / 2);
  EXPECT_EQ(readFile(dir.path() + "/env.1"),
            "rank 1 world 2 min 1 max 2 timeout 600000 threads " + std::to_string(threads) + "\n");
}

// A member that stops answering (SIGSTOP) without exiting: the others time out and say they left
// its membership; it never does, so after the grace the launcher stops it as failed and the job
// goes on without it (it hung until --elastic-timeout and then started over with the stopped
// worker alone).
TEST(GyreRunElastic, AMemberThatStopsAnsweringIsStoppedAndTheOthersGoOn) {
  const ProgramRun run =
      gyreRun({"--elastic", "-np", "3", "--min-np", "1", "--max-np", "3", "-x", "GYRE_TIMEOUT_MS=1500", "--",
               test::binDir() + "/gyre_elastic_counter", "300", "--step-ms", "10", "--stop", "1@40"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.err, "gyre run: worker 1 on host localhost stopped answering: worker "))
      << run.err;
  EXPECT_TRUE(contains(run.err, " left membership 1 ")) << run.err;
  EXPECT_TRUE(contains(run.err, "and it is still in it; stopping it; continuing with 2 workers")) << run.err;
  EXPECT_TRUE(contains(run.err, "gyre run: elastic epoch 2: workers 0, 2\n")) << run.err;
  // Both survivors finished every step, each step counted once.
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:worker 0: done at step 300, sum 300.000000\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[2]<stdout>:worker 2: done at step 300, sum 300.000000\n")) << run.out;
  // This job's counters only: ctest -j2 may run another test's meanwhile.
  EXPECT_TRUE(test::processesWith("gyre_elastic_counter 300 --step-ms 10 --stop 1@40").empty())
      << "the stopped worker was left behind";
}

TEST(GyreRunElastic, AReplacementWithAFreshIdJoinsTheSurvivors) {
  test::TempDir dir;
  const std::string logs = dir.path() + "/logs";
  const ProgramRun run =
      gyreRun({"--elastic", "-np", "2", "--min-np", "1", "--max-np", "2", "--max-restarts", "1",
               "--output-dir", logs, "--", member(), dir.path(), "--done-at-epoch", "3", "--kill", "1@0.3"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 2 rank 0 size 1\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 3 rank 0 size 2\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[2]<stdout>:member 2 epoch 3 rank 1 size 2\n")) << run.out;
  EXPECT_TRUE(contains(run.err,
                       "gyre run: starting worker 2 on host localhost to replace a lost one "
                       "(replacement 1 of 1, --max-restarts)\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "gyre run: elastic epoch 3: workers 0, 2\n")) << run.err;
  EXPECT_TRUE(contains(run.err, "(3 membership(s), 1 replacement(s) of --max-restarts 1)")) << run.err;
  // Logs are named by worker id; the replacement got one of its own.
  EXPECT_EQ(readFile(logs + "/rank.2.log"), "member 2 epoch 3 rank 1 size 2\n");
  EXPECT_TRUE(contains(readFile(logs + "/rank.1.log"), "member 1 epoch 1 rank 1 size 2\n"));
  EXPECT_TRUE(contains(readFile(dir.path() + "/env.2"), "rank 2 world 3 min 1 max 2 "));
}

TEST(GyreRunElastic, BelowMinNpPastTheElasticTimeOutTheLauncherGivesUp) {
  test::TempDir dir;
  const auto began = std::chrono::steady_clock::now();
  const ProgramRun run = gyreRun({"--elastic", "-np", "2", "--min-np", "2", "--max-np", "2",
                                  "--elastic-timeout", "2", "--", member(), dir.path(), "--kill", "1@0.3"});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 1) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.err,
                       "; 1 worker left, below --min-np 2: waiting up to 2.0 s (--elastic-timeout) "
                       "for more\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err,
                       "gyre run: only 1 worker(s) left, below --min-np 2, for 2.0 s "
                       "(--elastic-timeout); stopping\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err,
                       "gyre run: the job stayed below --min-np 2; what the elastic job went through:\n"
                       "gyre run:   elastic epoch 1: workers 0, 1\n"))
      << run.err;
  EXPECT_FALSE(contains(run.out, "epoch 2")) << run.out;
  // The workers exit 60 s after they started: the launcher stopped them well before.
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(50));
}

TEST(GyreRunElastic, ADiscoveredSlotStartsAWorkerThatJoins) {
  test::TempDir dir;
  const std::string script = discoveryScript(dir, "localhost:1\n");
  std::atomic<bool> grew{false};
  std::thread grow([&] {
    if (!waitFor(dir.path() + "/member.0", "epoch 1 ")) return;
    writeAtomically(dir.path() + "/hosts", "# now two slots\nlocalhost:2\n");
    grew = true;
  });
  const ProgramRun run = gyreRun({"--elastic", "--min-np", "1", "--max-np", "2", "--host-discovery-script",
                                  script, "--discovery-interval", "0.2", "--", member(), dir.path(),
                                  "--done-at-epoch", "2", "--exit-after", "60"});
  grow.join();
  EXPECT_TRUE(grew);
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 1 rank 0 size 1\n")) << run.out;
  EXPECT_TRUE(contains(run.out, "[1]<stdout>:member 1 epoch 2 rank 1 size 2\n")) << run.out;
  EXPECT_TRUE(contains(run.err, "gyre run: starting worker 1 on host localhost (a discovered slot)\n"))
      << run.err;
  EXPECT_FALSE(contains(run.err, "went on past")) << run.err;  // no failure
}

TEST(GyreRunElastic, ASlotThatDisappearsStopsItsWorkerWithoutAFailure) {
  test::TempDir dir;
  const std::string script = discoveryScript(dir, "localhost:2\n");
  std::thread shrink([&] {
    if (!waitFor(dir.path() + "/member.1", "epoch 1 ")) return;
    writeAtomically(dir.path() + "/hosts", "localhost:1\n");
  });
  const ProgramRun run =
      gyreRun({"--elastic", "--min-np", "1", "--max-np", "2", "--host-discovery-script", script,
               "--discovery-interval", "0.2", "--", member(), dir.path(), "--done-at-epoch", "2"});
  shrink.join();
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.err, "gyre run: host localhost has 1 slot(s) now; stopping worker(s) 1\n"))
      << run.err;
  EXPECT_TRUE(contains(run.out, "[0]<stdout>:member 0 epoch 2 rank 0 size 1\n")) << run.out;
  EXPECT_FALSE(contains(run.err, "was killed")) << run.err;  // a stopped worker is not a failure
}

TEST(GyreRunElastic, AFailingDiscoveryScriptWarnsAndKeepsTheHosts) {
  test::TempDir dir;
  const std::string script = discoveryScript(dir, "localhost:1\n");
  std::thread breakIt([&] {
    if (!waitFor(dir.path() + "/member.0", "epoch 1 ")) return;
    writeAtomically(dir.path() + "/discover.sh", "#!/bin/sh\necho broken >&2\nexit 3\n", 0755);
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    std::ofstream(dir.path() + "/stop");
  });
  const ProgramRun run = gyreRun({"--elastic", "--min-np", "1", "--max-np", "2", "--host-discovery-script",
                                  script, "--discovery-interval", "0.1", "--", member(), dir.path(),
                                  "--stop-file", dir.path() + "/stop"});
  breakIt.join();
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  const std::string warning =
      "gyre run: warning: --host-discovery-script exited with code 3: broken; keeping the "
      "previous host list\n";
  EXPECT_TRUE(contains(run.err, warning)) << run.err;
  EXPECT_EQ(run.err.find(warning), run.err.rfind(warning)) << "the same failure is reported once\n"
                                                           << run.err;
  EXPECT_FALSE(contains(run.err, "stopping worker")) << run.err;
}

TEST(GyreRunElastic, WorksAcrossHostsThroughTheRshAgent) {
  // Two "hosts" reached through an rsh agent that runs the command here: the replacement of the
  // worker killed on hostB goes to the slot it left.
  test::TempDir dir;
  const ProgramRun run = gyreRun({"--elastic",
                                  "--min-np",
                                  "1",
                                  "--max-np",
                                  "3",
                                  "--max-restarts",
                                  "1",
                                  "-H",
                                  "hostA:1,hostB:2",
                                  "--rsh-agent",
                                  test::fakeRsh(dir),
                                  "--network-interface",
                                  "lo",
                                  "--",
                                  member(),
                                  dir.path(),
                                  "--done-at-epoch",
                                  "3",
                                  "--kill",
                                  "1@0.3"});
  EXPECT_FALSE(run.timedOut);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(contains(run.err, "gyre run: worker 1 on host hostB was killed by SIGKILL (Killed) after "))
      << run.err;
  EXPECT_TRUE(contains(run.err, "gyre run: starting worker 3 on host hostB to replace a lost one"))
      << run.err;
  EXPECT_TRUE(contains(run.out, "[3]<stdout>:member 3 epoch 3 rank 2 size 3\n")) << run.out;
}

TEST(GyreRunElastic, CtrlCStopsEveryWorkerAndTellsTheStory) {
  test::TempDir dir;
  std::string script = test::gyreTool() + " run --elastic -np 2 --min-np 1 --max-np 2 -- " + member() + " " +
                       dir.path() + " & pid=$!\n";
  script += "for i in $(seq 600); do grep -q 'epoch 1 ' " + dir.path() +
            "/member.1 2>/dev/null && break; sleep 0.05; " +
            "done\nkill -INT $pid; wait $pid; echo \"launcher exit $?\"\n";
  const ProgramRun run =
      test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_TRUE(contains(run.out, "launcher exit 130")) << run.out << run.describe();
  EXPECT_TRUE(contains(run.err, "gyre run: interrupted by SIGINT (Interrupt); stopped every worker\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err,
                       "gyre run: stopped by SIGINT (Interrupt); what the elastic job went through:\n"
                       "gyre run:   elastic epoch 1: workers 0, 1\n"))
      << run.err;
  EXPECT_EQ(test::processesWith(dir.path()), std::vector<std::string>{});  // no worker survives
}

TEST(GyreRunElastic, TimeoutStopsTheJob) {
  test::TempDir dir;
  const ProgramRun run = gyreRun({"--elastic", "-np", "2", "--min-np", "1", "--max-np", "2", "--timeout",
                                  "1.5", "--", member(), dir.path()});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 124) << run.describe();
  EXPECT_TRUE(contains(run.err, "gyre run: the job ran past --timeout 1.5 s; stopped it\n")) << run.err;
}

TEST(GyreRunElastic, RefusesBadFlags) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--min-np", "1", "--", "true"}, "--min-np needs --elastic"},
      {{"--elastic-timeout", "5", "--", "true"}, "--elastic-timeout needs --elastic"},
      {{"--host-discovery-script", "true", "--", "true"}, "--host-discovery-script needs --elastic"},
      {{"--elastic", "-np", "2", "--", "true"}, "--elastic needs --min-np and --max-np"},
      {{"--elastic", "--min-np", "0", "--max-np", "2", "--", "true"}, "--min-np must be at least 1"},
      {{"--elastic", "--min-np", "3", "--max-np", "2", "--", "true"}, "--min-np 3 is above --max-np 2"},
      {{"--elastic", "--min-np", "1", "--max-np", "2", "-np", "3", "--", "true"},
       "-np 3 is outside --min-np 1 .. --max-np 2"},
      {{"--elastic", "--min-np", "2", "--max-np", "4", "-H", "localhost:1", "--", "true"},
       "only 1 slot(s) known at start, below --min-np 2"},
      {{"--elastic", "--min-np", "1", "--max-np", "2", "-H", "localhost", "--host-discovery-script", "true",
        "--", "true"},
       "give --host-discovery-script or -H/--hostfile, not both"},
      {{"--elastic", "--min-np", "1", "--max-np", "2", "--elastic-timeout", "0", "--", "true"},
       "--elastic-timeout must be a finite number in [0.001, 2147483] s"},
  };
  for (const auto& [args, message] : cases) {
    const ProgramRun run = gyreRun(args);
    EXPECT_EQ(run.exitCode, 2) << message << "\n" << run.describe();
    EXPECT_TRUE(contains(run.err, message)) << run.err;
  }
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
