// `gyre run` as a user runs it: workers' environment and output, a real job, and supervision:
// a worker that exits 3 or is SIGKILLed stops the job with one line naming it, Ctrl-C and
// --timeout stop every worker, nothing a worker started survives the job, and a worker that
// cannot meet its peers fails at --start-timeout naming what it tried. "Remote" hosts are
// reached through an --rsh-agent that runs the command here, which exercises the agent path.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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
using test::uniqueSleep;

using test::gyreRun;

ProgramRun shell(const std::string& script) {
  return test::runProgram({{"/bin/sh", "-c", script}, test::cleanEnvironment()}, test::kJobTimeout);
}

// Every worker starts two long sleeps: one in its process group, one escaping it with setsid
// (the agent must still find it, as their subreaper). Then it signals it has started.
std::string startLeftovers(const std::string& sleep, const std::string& dir) {
  return "sleep " + sleep + " & setsid sleep " + sleep + " & touch " + dir + "/started.$GYRE_RANK; ";
}

TEST(GyreRun, WorkersGetTheirPlaceThreadsAndTaggedOutput) {
  auto env = test::cleanEnvironment();
  env.erase("OMP_NUM_THREADS");
  env["OPENBLAS_NUM_THREADS"] = "7";  // set by the user: kept
  // -x right before -- must not swallow the separator.
  const ProgramRun run =
      gyreRun({"-np", "3", "--threads", "2", "-x", "FOO=a b", "--", "/bin/sh", "-c",
               "echo foo=$FOO rank=$GYRE_RANK size=$GYRE_WORLD_SIZE local=$GYRE_LOCAL_RANK/$GYRE_LOCAL_SIZE "
               "threads=$GYRE_NUM_THREADS omp=$OMP_NUM_THREADS blas=$OPENBLAS_NUM_THREADS "
               "secret=${#GYRE_SECRET} store=$GYRE_STORE_ADDR; echo to-stderr >&2"},
              env);
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  for (int r = 0; r < 3; ++r) {
    const std::string expect = "[" + std::to_string(r) + "]<stdout>:foo=a b rank=" + std::to_string(r) +
                               " size=3 local=" + std::to_string(r) +
                               "/3 threads=2 omp=2 blas=7 secret=64 store=127.0.0.1:";
    EXPECT_NE(run.out.find(expect), std::string::npos) << expect << "\n" << run.out;
    EXPECT_NE(run.err.find("[" + std::to_string(r) + "]<stderr>:to-stderr"), std::string::npos) << run.err;
  }
}

TEST(GyreRun, OneWorkerIsUntaggedAndOutputDirKeepsEachRanksLog) {
  test::TempDir dir;
  ProgramRun run = gyreRun({"-np", "1", "--", "/bin/sh", "-c", "echo plain"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.out, "plain\n");

  run = gyreRun(
      {"-np", "2", "--output-dir", dir.path() + "/logs", "--", "/bin/sh", "-c", "echo hello $GYRE_RANK"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  for (int r = 0; r < 2; ++r) {
    std::ifstream log(dir.path() + "/logs/rank." + std::to_string(r) + ".log");
    std::string line;
    std::getline(log, line);
    EXPECT_EQ(line, "hello " + std::to_string(r));
  }
}

TEST(GyreRun, RunsARealJobOnThisHostAndThroughTheRshAgent) {
  test::TempDir dir;
  const std::string check = test::binDir() + "/gyre_collective_check";
  ProgramRun local = gyreRun({"-np", "3", "--", check});
  ASSERT_EQ(local.exitCode, 0) << local.describe();
  // Two "hosts" reached through the rsh agent, two and one workers: shm inside, tcp across.
  ProgramRun remote = gyreRun({"-H", "hostA:2,hostB:1", "--rsh-agent", fakeRsh(dir), "--network-interface",
                               "lo", "--no-tag-output", "--", check});
  ASSERT_EQ(remote.exitCode, 0) << remote.describe();
  // The rank lines of either run, with gyre run's tags taken off.
  const auto rankLines = [](const std::string& out) {
    std::string untagged;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const auto tag = line.find("]<stdout>:");
      untagged += (line.starts_with("[") && tag != std::string::npos ? line.substr(tag + 10) : line) + "\n";
    }
    return test::rankLines(untagged);
  };
  // The same results, bit for bit, whoever started the ranks.
  std::string untagged;
  for (std::string l : rankLines(local.out)) untagged += l + "\n";
  std::string remoteLines;
  for (const std::string& l : rankLines(remote.out)) remoteLines += l + "\n";
  EXPECT_EQ(untagged, remoteLines);
  EXPECT_FALSE(remoteLines.empty());
}

TEST(GyreRun, AWorkerThatExitsNonZeroStopsTheJobWithOneLineNamingIt) {
  test::TempDir dir;
  const std::string sleep = uniqueSleep();
  // Rank 1 lives at least 0.5 s, so the time in its line has a known lower bound.
  const auto begin = std::chrono::steady_clock::now();
  const ProgramRun run = gyreRun(
      {"-np", "3", "--", "/bin/sh", "-c",
       startLeftovers(sleep, dir.path()) +
           "if [ $GYRE_RANK = 1 ]; then echo last words; sleep 0.5; exit 3; fi; exec sleep " + sleep});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 3) << run.describe();
  double seconds = -1;
  const auto line = run.err.find("gyre run: rank 1 on host localhost exited with code 3 after ");
  ASSERT_NE(line, std::string::npos) << run.err;
  EXPECT_EQ(std::sscanf(run.err.c_str() + line,
                        "gyre run: rank 1 on host localhost exited with code 3 after %lf s", &seconds),
            1)
      << run.err;
  EXPECT_GE(seconds, 0.5) << run.err;          // printed with one decimal (%.1f)
  EXPECT_LE(seconds, wall + 0.05) << run.err;  // within the whole `gyre run`, up to that rounding
  EXPECT_NE(run.err.find("[1] last words"), std::string::npos) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRun, AKilledWorkerIsNamedWithItsSignal) {
  test::TempDir dir;
  const std::string sleep = uniqueSleep();
  const ProgramRun run = gyreRun({"-np", "3", "--output-dir", dir.path() + "/logs", "--", "/bin/sh", "-c",
                                  startLeftovers(sleep, dir.path()) +
                                      "if [ $GYRE_RANK = 2 ]; then kill -9 $$; fi; exec sleep " + sleep});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 128 + 9) << run.describe();
  EXPECT_NE(run.err.find("rank 2 on host localhost was killed by SIGKILL"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("its output is in " + dir.path() + "/logs/rank.2.log"), std::string::npos)
      << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

// --keep-going: rank 0 drives, the others serve. A killed server is reported and the job goes on;
// when rank 0 ends, the others (still serving) are stopped and the job ends with rank 0's code.
TEST(GyreRun, KeepGoingOutlivesAServerAndEndsWithRankZero) {
  test::TempDir dir;
  const std::string sleep = uniqueSleep();
  const std::string rank0 = "if [ $GYRE_RANK = 0 ]; then sleep 1; echo driver done; exit ";
  ProgramRun run = gyreRun({"-np", "3", "--keep-going", "--", "/bin/sh", "-c",
                            startLeftovers(sleep, dir.path()) + rank0 +
                                "0; fi; if [ $GYRE_RANK = 2 ]; then kill -9 $$; fi; exec sleep " + sleep});
  EXPECT_FALSE(run.timedOut);
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_NE(run.err.find("gyre run: rank 2 on host localhost was killed by SIGKILL (Killed) after "), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("the job goes on without it (--keep-going)"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("[0]<stdout>:driver done"), std::string::npos) << run.out;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});

  // Rank 0's failure is the job's.
  run = gyreRun({"-np", "2", "--keep-going", "--", "/bin/sh", "-c",
                 startLeftovers(sleep, dir.path()) + rank0 + "4; fi; exec sleep " + sleep});
  EXPECT_EQ(run.exitCode, 4) << run.describe();
  EXPECT_NE(run.err.find("gyre run: rank 0 on host localhost exited with code 4"), std::string::npos) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});

  run = gyreRun({"-np", "2", "--keep-going", "--elastic", "--min-np", "1", "--max-np", "2", "--", "true"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_NE(run.err.find("--keep-going does not work with --elastic"), std::string::npos) << run.err;
}

// Ctrl-C: the shell sends SIGINT to the launcher once every worker has started.
void interruptTest(const std::vector<std::string>& hostArgs, const test::TempDir& dir) {
  const std::string sleep = uniqueSleep();
  std::string script = test::gyreTool() + " run";
  for (const auto& a : hostArgs) script += " '" + a + "'";
  script += " -- /bin/sh -c '" + startLeftovers(sleep, dir.path()) + "exec sleep " + sleep + "' & pid=$!\n";
  script += "for i in $(seq 600); do [ -e " + dir.path() + "/started.0 ] && [ -e " + dir.path() +
            "/started.2 ] && break; sleep 0.05; done\n"
            "kill -INT $pid; wait $pid; echo \"launcher exit $?\"\n";
  const ProgramRun run = shell(script);
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_NE(run.out.find("launcher exit 130"), std::string::npos) << run.out << run.describe();
  EXPECT_NE(run.err.find("gyre run: interrupted by SIGINT"), std::string::npos) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRun, CtrlCStopsEveryWorkerAndLeavesNothingBehind) {
  test::TempDir dir;
  interruptTest({"-np", "3"}, dir);
}

TEST(GyreRun, CtrlCStopsWorkersOnRshHostsToo) {
  test::TempDir dir;
  interruptTest({"-H", "hostA:2,hostB:1", "--rsh-agent", fakeRsh(dir), "--network-interface", "lo"}, dir);
}

TEST(GyreRun, TimeoutStopsTheJob) {
  const std::string sleep = uniqueSleep();
  const ProgramRun run = gyreRun({"-np", "2", "--timeout", "1", "--", "sleep", sleep});
  EXPECT_EQ(run.exitCode, 124) << run.describe();
  EXPECT_NE(run.err.find("ran past --timeout 1.0 s"), std::string::npos) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRun, AWorkerThatCannotMeetItsPeersFailsAtTheStartTimeout) {
  // Rank 1 never calls init(): rank 0 gives up after --start-timeout, naming the store, its
  // host and the peer it waited for.
  const std::string sleep = uniqueSleep();
  const ProgramRun run = gyreRun(
      {"-np", "2", "--start-timeout", "2", "--", "/bin/sh", "-c",
       "if [ $GYRE_RANK = 0 ]; then exec " + test::binDir() + "/gyre_init_check; fi; exec sleep " + sleep});
  EXPECT_FALSE(run.timedOut);
  EXPECT_NE(run.exitCode, 0);
  EXPECT_NE(run.err.find("rank 0 of 2 on host"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("could not start (store 127.0.0.1:"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("start-up time-out 2000 ms"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("world/mesh/1"), std::string::npos) << run.err;
  EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
}

TEST(GyreRun, AStoreThatCannotBeReachedIsNamed) {
  // A worker started by hand against a port nobody listens on.
  auto env = test::cleanEnvironment();
  env["GYRE_RANK"] = "1";
  env["GYRE_WORLD_SIZE"] = "2";
  env["GYRE_LOCAL_RANK"] = "1";
  env["GYRE_LOCAL_SIZE"] = "2";
  env["GYRE_SECRET"] = "s";
  env["GYRE_STORE_ADDR"] = "127.0.0.1:1";
  env["GYRE_START_TIMEOUT_MS"] = "500";
  const ProgramRun run = test::runProgram({{test::binDir() + "/gyre_init_check"}, env}, test::kJobTimeout);
  EXPECT_NE(run.exitCode, 0);
  EXPECT_NE(run.err.find("rank 1 of 2 on host"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("127.0.0.1:1"), std::string::npos) << run.err;
}

TEST(GyreRun, AnAgentThatCannotStartIsNamedWithItsHost) {
  const ProgramRun run =
      gyreRun({"-H", "nohost:1", "--rsh-agent", "false", "--network-interface", "lo", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_NE(run.err.find("host nohost: its agent (false nohost"), std::string::npos) << run.err;
}

TEST(GyreRun, BadCommandLinesAreRefusedClearly) {
  ProgramRun run = gyreRun({"-np", "2"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  run = gyreRun({"-np", "5", "-H", "localhost:2", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_NE(run.err.find("-np 5 asks for more workers than the 2 slots"), std::string::npos) << run.err;
  run = gyreRun({"-H", "a:x", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("slots must be a positive integer"), std::string::npos) << run.err;
  run = gyreRun({"-np", "1", "--", "/nonexistent/program"});
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("cannot find the program '/nonexistent/program'"), std::string::npos) << run.err;
}

// A rank that stops answering (SIGSTOP) makes the others time out; the summary names it, not
// only the survivor that failed first.
TEST(GyreRun, ARankThatStopsAnsweringIsNamedNotOnlyItsFirstVictim) {
  test::Environment env = test::cleanEnvironment();
  const ProgramRun run = gyreRun({"-np", "3", "-x", "GYRE_TIMEOUT_MS=1500", "--", test::binDir() + "/gyre_peer_loss_check",
                                  "1", "stop"},
                                 env);
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_NE(run.err.find("rank(s) 1 stopped answering: the failed workers timed out waiting for them"),
            std::string::npos)
      << run.err;
  // This job's ranks only ("1 stop"): ctest -j2 may run another test's meanwhile.
  EXPECT_TRUE(processesWith("gyre_peer_loss_check 1 stop").empty()) << "the stopped rank was left behind";
}

// Every number gyre run takes, given NaN, infinities, too much, too little, or 0 where 0 makes no
// sense: refused before anything starts (exit 2), naming the flag and the accepted range.
TEST(GyreRun, EveryNumberFlagIsRangeCheckedBeforeAnythingStarts) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string seconds = " must be a finite number in [0.001, 2147483] s; got ";
  const std::vector<Case> cases = {
      {{"-np", "0"}, "-np must be an integer of at least 1; got 0"},
      {{"-np", "-1"}, "-np must be an integer of at least 1; got -1"},
      {{"-np", "99999999999"}, "--np"},
      {{"--timeout", "inf"}, "--timeout must be a finite number in [0, 2147483] s (0: never); got inf"},
      {{"--timeout", "1e300"}, "--timeout must be a finite number in [0, 2147483] s (0: never); got 1e+300"},
      {{"--timeout", "nan"}, "--timeout must be a finite number in [0, 2147483] s (0: never); got nan"},
      {{"--timeout", "-1"}, "--timeout must be a finite number in [0, 2147483] s (0: never); got -1"},
      {{"--start-timeout", "1e10"}, "--start-timeout" + seconds + "1e+10"},
      {{"--start-timeout", "0"}, "--start-timeout" + seconds + "0"},
      {{"--start-timeout", "0.0001"}, "--start-timeout" + seconds + "1e-04"},
      {{"--start-timeout", "-inf"}, "--start-timeout" + seconds + "-inf"},
      {{"--threads", "-3"}, "--threads must be an integer in [0, 1048576] (0: cores / workers on the host); got -3"},
      {{"--max-restarts", "-1"}, "--max-restarts must be an integer in [0, 1048576] (0: no restarts); got -1"},
      {{"--servers", "-1"}, "--servers must be an integer in [0, 1048576] (0: no parameter servers); got -1"},
      {{"--elastic", "--min-np", "1", "--max-np", "2", "--elastic-timeout", "inf"}, "--elastic-timeout" + seconds + "inf"},
      {{"--elastic", "--min-np", "1", "--max-np", "2", "--discovery-interval", "0"},
       "--discovery-interval" + seconds + "0"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--", "/bin/true"});
    const ProgramRun run = gyreRun(args);
    EXPECT_EQ(run.exitCode, 2) << run.describe();
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.args[0] << ": " << run.err;
  }
}

#else
TEST(GyreRun, NeedsTheTool) {
  GTEST_SKIP() << "the gyre tool is not built (GYRE_BUILD_APPS=OFF)";
}
#endif

}  // namespace
}  // namespace gyre
