// Runs programs (the gyre tool, scripts) as child processes with an environment of the test's
// choosing, under a time-out, and captures what they print. For the tests that start real
// processes the way a launcher or a user would.
#pragma once

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

namespace gyre::test {

using Environment = std::map<std::string, std::string>;

struct ProgramSpec {
  std::vector<std::string> argv;  // argv[0] is the path executed (no PATH search)
  Environment env;                // the child's whole environment
};

struct ProgramRun {
  int exitCode = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timedOut = false;  // killed by runPrograms after its time-out
  std::string out;        // everything written to stdout
  std::string err;        // everything written to stderr
  // "exited with code 2", "killed by signal 9 after the 60 s time-out", plus its stderr.
  std::string describe() const;
};

// This process's environment without any launcher variable (GYRE_*, OMPI_*, PMIX_*, SLURM_*,
// and torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_*), so a child sees exactly the variables a test adds.
Environment cleanEnvironment();

// Starts every program at once, each in a process group of its own with stdin on /dev/null,
// and waits for all of them. A program still running after `timeout` is killed with its whole
// process group (SIGKILL) and reported as timedOut. Safe to call from a process with threads:
// the children only call async-signal-safe functions before execve.
std::vector<ProgramRun> runPrograms(const std::vector<ProgramSpec>& programs, std::chrono::seconds timeout);

// One program; see runPrograms.
ProgramRun runProgram(const ProgramSpec& program, std::chrono::seconds timeout);
// runProgram on a thread of its own, for a test that acts while the program runs.
std::future<ProgramRun> startProgram(ProgramSpec program, std::chrono::seconds timeout);

// The whole contents of the file at `path` (bytes as they are); empty when it cannot be read.
std::string readFile(const std::string& path);

// A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick), for a server the test
// starts; another process may take it meanwhile, as with any such pick.
int freePort();

// True when `part` occurs in `text`.
bool contains(const std::string& text, const std::string& part);

}  // namespace gyre::test
