// Whole jobs started through a launcher (mpirun, `gyre run`), compared by what their ranks
// print. tests/mpi/ runs gyre_collective_check under mpirun with each transport and compares the
// rank lines; a test of `gyre run` can run the same program with the same helpers:
//
//   JobRun run = runJob({binDir() + "/gyre", "run", "-np", "3", "--",
//                        binDir() + "/gyre_collective_check"}, cleanEnvironment(), 300s);
//   EXPECT_TRUE(run.ok) << run.run.describe();
//   EXPECT_EQ(run.rankLines, linesUnderMpirun);
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "support/programs.h"
#include "support/ranks.h"

namespace gyre::test {

// The folder the build puts its programs in (build/bin: gyre, gyre_collective_check, ...).
std::string binDir();
// gyre's source tree (its scripts, docs and examples).
std::string sourceDir();
// The gyre tool of this build: binDir() + "/gyre".
std::string gyreTool();

// How long a test gives a small job under `gyre run` before it kills it and fails.
inline constexpr std::chrono::seconds kJobTimeout{120};

// `gyre run ARGS` with exactly `env` as its environment, killed after `timeout`.
ProgramRun gyreRun(std::vector<std::string> args, const Environment& env = cleanEnvironment(),
                   std::chrono::seconds timeout = kJobTimeout);

// The full path of `name` on PATH, or empty when it is not there.
std::string findOnPath(const std::string& name);

// The lines of `out` that begin with "rank ", sorted: ranks' output arrives in any order.
std::vector<std::string> rankLines(const std::string& out);

struct JobRun {
  ProgramRun run;
  std::vector<std::string> rankLines;  // sorted
  bool ok = false;                     // exited 0 and printed a line "OK"
};

// Runs a job's command line (argv[0] is looked up on PATH) with exactly `env` as its
// environment (start from cleanEnvironment()), killing it with its process group after
// `timeout`.
JobRun runJob(std::vector<std::string> argv, const Environment& env, std::chrono::seconds timeout);

// mpirun with the flags a test job needs on this machine: --oversubscribe (ranks may outnumber
// cores), --allow-run-as-root when running as root, `-x NAME` for every GYRE_* variable of
// `env` (so ranks on other hosts get them too), `extraFlags`, then -np `np` and `program`.
// Empty when mpirun is not on PATH.
std::vector<std::string> mpirunCommand(int np, const Environment& env,
                                       const std::vector<std::string>& program,
                                       const std::vector<std::string>& extraFlags = {});

// Writes DIR/fake-rsh, an --rsh-agent for `gyre run` that runs on this host what ssh would run
// on another: `fake-rsh HOST COMMAND` runs COMMAND here. Returns its path. With `holdFrom` > 0,
// the holdFrom-th and later connections to a host instead touch DIR/held and sleep `sleep`
// seconds: an agent of a later generation that never starts.
std::string fakeRsh(const TempDir& dir, int holdFrom = 0, const std::string& sleep = "");

}  // namespace gyre::test
