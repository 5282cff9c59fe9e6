// What the benchmarks that run whole jobs share (gyre bench ps's time-to-accuracy part, gyre
// bench comm): running one child command with its output in a log, bounded in time and stopped
// with everything it started, and reading what it left behind.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "gyre/errors.h"

namespace gyre::app {

// A run that ends the benchmark command: carries the command's exit code (1, or 128 + signal
// after Ctrl-C, when the run is stopped).
class RunFailed : public Error {
 public:
  RunFailed(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

struct ChildRun {
  bool ok = false;
  std::string error;  // why not: the exit or the time-out, with the log's last lines
  double wallS = 0;
};

// Runs argv (argv[0]: the program's path) in a process group of its own, stdout and stderr into
// `log` (truncated first), for at most timeoutS seconds, after which it and all it started are
// stopped. Throws RunFailed when Ctrl-C (or SIGTERM) arrived meanwhile (the caller installs
// the handlers), Error when the log cannot be written.
ChildRun runLoggedChild(const std::string& name, const std::vector<std::string>& argv,
                        const std::filesystem::path& log, double timeoutS);

// --run-root and --keep-runs of a benchmark whose runs keep directories.
struct RunRootFlags {
  std::string path;
  bool keep = false;
};
// Adds them to `cmd`; returns both options (to put them in a group).
std::vector<CLI::Option*> addRunRootOptions(CLI::App& cmd, RunRootFlags& flags);

// Where a benchmark's runs keep their directories: flags.path (made absolute), or a new temporary
// directory named after `tool` ("gyre bench comm": gyre-bench-comm-XXXXXX) when it is empty. done() removes a
// temporary one when every run went well and flags.keep is false, and otherwise says where it is.
class RunRoot {
 public:
  RunRoot(const RunRootFlags& flags, const std::string& tool);
  const std::filesystem::path& path() const { return path_; }
  void done(bool failed) const;

 private:
  std::filesystem::path path_;
  std::string tool_;
  bool temporary_ = false;
  bool keep_ = false;
};

// Every line of a file (none when it cannot be read).
std::vector<std::string> readLines(const std::filesystem::path& path);
// The last `count` non-empty lines of a log, joined with " | ", for a failure message.
std::string logTail(const std::filesystem::path& log, std::size_t count = 3);

}  // namespace gyre::app
