// Running a short external command and reading its output, bounded in time and in bytes: what
// `gyre info` probes the machine with, and what gyre tune's Slurm executor drives sbatch, squeue,
// scontrol and scancel with.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace gyre::launcher {

struct CommandOptions {
  // The command, and every process it started in its process group, is killed (SIGKILL) when it
  // has not ended by then.
  std::chrono::milliseconds timeout{3000};
  // Output beyond this is read and dropped, so a chatty command can neither block nor bloat us.
  std::size_t maxOutputBytes = 64 * 1024;
  // Variables set (or replaced) in, and removed from, the inherited environment.
  std::vector<std::pair<std::string, std::string>> setEnv;
  std::vector<std::string> unsetEnv;
};

struct CommandResult {
  bool started = false;   // false: it could not be executed (see `error`)
  bool timedOut = false;  // killed at the time-out
  int exitCode = -1;      // its exit status, -1 when a signal ended it or it did not start
  int signal = 0;         // the signal that ended it
  std::string output;     // stdout and stderr, interleaved as written
  std::string error;      // why it did not start, or how it ended when not ok()
  bool ok() const { return started && !timedOut && exitCode == 0; }
};

// Runs argv (argv[0] searched in PATH) with stdin from /dev/null, capturing stdout and stderr,
// and returns when it has exited and its output is read, or at the time-out. Never blocks longer
// than about the time-out. The command leads a process group of its own, and whatever is left
// in that group when it returns is killed: nothing it started outlives the call. Throws
// InvalidArgument for an empty argv and SystemError when a pipe cannot be made.
CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

}  // namespace gyre::launcher
