// `gyre run --servers S`: parameter server processes beside the workers. Two workers of
// gyre_ps_check train a two-key table through two servers in bsp and check every step; workers
// and servers get their environment; the servers are stopped (and print their stats) once the
// workers are done, or when a worker fails; a server killed mid-run is reported on one line and
// does not stop the job (under shell workers, and under gyre_ps_check, whose workers fail over to
// the backup and still see every step's update); bad values and a worker or server outside such
// a job are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using test::ProgramRun;

using test::gyreRun;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GyreRunServers, TwoWorkersTrainThroughTwoServersInBsp) {
  const ProgramRun run = gyreRun({"-np", "2", "--servers", "2", "--", test::binDir() + "/gyre_ps_check"});
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(has(run.out, "[0]<stdout>:ps worker 0 ok\n")) << run.out;
  EXPECT_TRUE(has(run.out, "[1]<stdout>:ps worker 1 ok\n")) << run.out;
  // Stopped once the workers were done, each with a line of what it served.
  for (const char* server :
       {"[ps0]<stderr>:gyre ps-server 0 (127.0.0.1:", "[ps1]<stderr>:gyre ps-server 1 (127.0.0.1:"})
    EXPECT_TRUE(has(run.err, server)) << server << "\n" << run.err;
  EXPECT_TRUE(has(run.err, "stopped by SIGTERM; ")) << run.err;
  EXPECT_FALSE(has(run.err, "gyre run: ps server")) << run.err;  // none was lost
}

TEST(GyreRunServers, WorkersAndServersGetTheirEnvironment) {
  // The workers are shell scripts: what a worker sees, and a job that ends when they do.
  const ProgramRun run =
      gyreRun({"-np", "2", "--servers", "3", "--", "/bin/sh", "-c",
               "echo rank=$GYRE_RANK servers=$GYRE_PS_SERVERS index=${GYRE_PS_SERVER_INDEX:-none}"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_TRUE(has(run.out, "[0]<stdout>:rank=0 servers=3 index=none\n")) << run.out;
  EXPECT_TRUE(has(run.out, "[1]<stdout>:rank=1 servers=3 index=none\n")) << run.out;
  // The servers were stopped when the workers were done (they may not have been up yet: these
  // workers do not wait for them), and none counts as lost.
  EXPECT_FALSE(run.timedOut);
  EXPECT_FALSE(has(run.err, "gyre run: ps server")) << run.err;
}

TEST(GyreRunServers, AKilledServerIsReportedAndTheJobGoesOn) {
  // Rank 0 finds server 1 of its own job (by its environment) and kills it, then the workers
  // finish after the launcher has had time to see it.
  const std::string killServer1 =
      "if [ $GYRE_RANK = 0 ]; then"
      "  n=0; while [ $n -lt 200 ]; do"
      "    for p in /proc/[0-9]*; do"
      "      if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx \"GYRE_JOB_ID=$GYRE_JOB_ID\" &&"
      "         tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx GYRE_PS_SERVER_INDEX=1; then"
      "        kill -9 ${p#/proc/} && echo killed && n=1000; fi;"
      "    done; n=$((n + 1)); sleep 0.05;"
      "  done;"
      "fi; sleep 1";
  const ProgramRun run = gyreRun({"-np", "2", "--servers", "2", "--", "/bin/sh", "-c", killServer1});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_TRUE(has(run.out, "[0]<stdout>:killed\n")) << run.out;
  EXPECT_TRUE(has(run.err, "gyre run: ps server 1 (pid ")) << run.err;
  EXPECT_TRUE(has(run.err, "was killed by SIGKILL (Killed) after ")) << run.err;
  EXPECT_TRUE(has(run.err, "; workers fail over to its backup, ps server 0\n")) << run.err;
  EXPECT_FALSE(has(run.err, "gyre run: ps server 0")) << run.err;  // stopped at the end, not lost
}

TEST(GyreRunServers, WorkersFailOverWhenAServerIsKilledMidRun) {
  // Rank 0 starts a killer beside itself: once its first step is done (every server is up), it
  // kills server 1 of its own job; the workers go on through the backup, server 0, for 40 steps.
  test::TempDir dir;
  const std::string stepped = dir.path() + "/stepped";
  const std::string script =
      "if [ $GYRE_RANK = 0 ]; then ("
      "  n=0; while [ ! -e " +
      stepped +
      " ] && [ $n -lt 1200 ]; do n=$((n + 1)); sleep 0.05; done;"
      "  for p in /proc/[0-9]*; do"
      "    if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx \"GYRE_JOB_ID=$GYRE_JOB_ID\" &&"
      "       tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx GYRE_PS_SERVER_INDEX=1; then"
      "      kill -9 ${p#/proc/}; fi;"
      "  done ) & fi; exec " +
      test::binDir() + "/gyre_ps_check 40 50 " + stepped;
  const ProgramRun run = gyreRun({"-np", "2", "--servers", "2", "--", "/bin/sh", "-c", script});
  ASSERT_EQ(run.exitCode, 0) << run.describe() << run.out;
  EXPECT_TRUE(has(run.out, "[0]<stdout>:ps worker 0 ok\n")) << run.out;
  EXPECT_TRUE(has(run.out, "[1]<stdout>:ps worker 1 ok\n")) << run.out;
  EXPECT_TRUE(has(run.err, "gyre run: ps server 1 (pid ")) << run.err;
  EXPECT_TRUE(has(run.err, "; workers fail over to its backup, ps server 0\n")) << run.err;
  EXPECT_TRUE(has(run.err, "[ps0]<stderr>:gyre ps-server 0 (")) << run.err;  // stopped at the end
}

TEST(GyreRunServers, AFailedWorkerStopsTheServers) {
  const ProgramRun run = gyreRun({"-np", "2", "--servers", "1", "--", "/bin/sh", "-c",
                                  "if [ $GYRE_RANK = 1 ]; then sleep 0.5; exit 3; fi; sleep 600"});
  EXPECT_EQ(run.exitCode, 3) << run.describe();
  EXPECT_FALSE(run.timedOut);  // rank 0 and the server were stopped
  EXPECT_TRUE(has(run.err, "gyre run: rank 1 on host localhost exited with code 3")) << run.err;
  EXPECT_FALSE(has(run.err, "gyre run: ps server 0")) << run.err;  // stopped, not lost
}

TEST(GyreRunServers, BadValuesAreRefused) {
  ProgramRun run = gyreRun({"--servers", "-1", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(has(run.err, "gyre: invalid argument: --servers must be an integer in [0, 1048576]")) << run.err;
  run = gyreRun({"--servers", "two", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(has(run.err, "--servers")) << run.err;
  run = gyreRun({"--elastic", "--min-np", "1", "--max-np", "2", "--servers", "1", "--", "/bin/true"});
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(has(run.err, "--servers does not work with --elastic yet")) << run.err;
}

TEST(GyreRunServers, WorkersAndServersOutsideSuchAJobSayWhy) {
  ProgramRun run =
      test::runProgram({{test::binDir() + "/gyre_ps_check"}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_TRUE(has(run.err, "not started by gyre run --servers")) << run.err;
  run = test::runProgram({{test::gyreTool(), "ps-server"}, test::cleanEnvironment()}, test::kJobTimeout);
  EXPECT_EQ(run.exitCode, 2) << run.describe();
  EXPECT_TRUE(has(run.err, "gyre ps-server: invalid environment: GYRE_PS_SERVERS is not set")) << run.err;
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
