// Child processes of the gyre tool (local ranks, mpirun): starting them, watching them under a
// deadline, and stopping every one of them on failure, time-out or Ctrl-C, so that the tool
// never hangs and never leaves orphans behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace gyre::launcher {

struct ChildSpec {
  std::string name;               // used in messages: "rank 3", "mpirun"
  std::string path;               // executable passed to execve, e.g. "/proc/self/exe"
  std::vector<std::string> argv;  // argv[0] included
  // Variables set (or replaced) in the child's environment; the rest is inherited.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables removed from the child's environment.
  std::vector<std::string> unsetEnv;
  int keepFd = -1;    // a close-on-exec descriptor the child inherits anyway
  int stdinFd = -1;   // becomes the child's stdin when >= 0
  int stdoutFd = -1;  // becomes the child's stdout when >= 0
  int stderrFd = -1;  // becomes the child's stderr when >= 0
  // The child leads a new process group and is stopped as a group (mpirun and its ranks).
  bool ownProcessGroup = false;
};

struct ChildExit {
  std::string name;
  pid_t pid = 0;
  int code = -1;   // exit status, or -1 when killed by a signal
  int signal = 0;  // the signal that ended it
  bool ok() const { return code == 0; }
  // "rank 1 exited with code 3", "rank 0 was killed by signal 11 (Segmentation fault)"
  std::string describe() const;
};

// The children of one job. Every child gets PR_SET_PDEATHSIG(SIGKILL), so it dies with the tool
// even if the tool is killed with SIGKILL. The destructor stops any child still running.
class ProcessGroup {
 public:
  ProcessGroup() = default;
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Forks and execs; returns the child's pid. Throws SystemError if fork fails. An exec failure
  // shows as exit code 127.
  pid_t spawn(const ChildSpec& spec);
  // Children that ended since the last call; never blocks.
  std::vector<ChildExit> reap();
  bool empty() const { return running_.empty(); }
  std::vector<std::string> runningNames() const;
  // SIGTERM to every child still running, then SIGKILL to those alive after `grace`; reaps all.
  void stopAll(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Sends `sig` to every child still running (to its process group when it leads one).
  void signalAll(int sig);

 private:
  struct Child {
    std::string name;
    pid_t pid;
    bool group;
  };
  std::vector<Child> running_;
};

// From now on SIGINT, SIGTERM and SIGHUP only set a flag that supervise() checks, so the tool can
// stop its children before it exits.
void installInterruptHandlers();
// The signal that arrived, or 0.
int interruptSignal();

struct SuperviseResult {
  bool ok = true;
  std::string error;  // what went wrong, for stderr
  int exitCode = 0;   // what the tool should exit with
};

// Watches `group` until every child has exited successfully. Calls onLine for every line read
// from `lineFd` (-1: none; the descriptor is read to its end and left open). Stops all children
// and returns an error as soon as a child fails, the deadline passes, an interrupt arrives or
// onLine throws.
SuperviseResult supervise(ProcessGroup& group, int lineFd, Deadline deadline, const std::string& what,
                          const std::function<void(const std::string&)>& onLine);

// This process's environment as "NAME=VALUE" strings for execve, with `set` replacing or adding
// variables and `unset` removed.
std::vector<std::string> environmentWith(const std::vector<std::pair<std::string, std::string>>& set,
                                         const std::vector<std::string>& unset);
// NULL-terminated pointers into `strings`, for execve and posix_spawn.
std::vector<char*> execPointers(std::vector<std::string>& strings);

// Searches PATH for an executable; returns "" if there is none. A name with a '/' is checked as is.
std::string findExecutable(const std::string& name);

// The absolute path of this executable (/proc/self/exe resolved).
std::string selfExecutable();

}  // namespace gyre::launcher
