// Executors run a trial's runs: processes on this host's slots (executor_local.cc), and later on
// other hosts or as Slurm jobs. A run holds `slots` slots from start() until wait() reports its end.
//
// Thread-safety: none; the runner calls an executor from one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launcher/hosts.h"

namespace gyre::tune {

struct RunSpec {
  int trial = 0;
  std::vector<std::string> argv;  // argv[0]: the program, found on PATH when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;
  std::string logPath;  // stdout and stderr, appended
  int slots = 1;
  // The program starts its `slots` workers itself (gyre train --np N); otherwise a run of more
  // than one slot is started as a gyre job (gyre run -np N).
  bool startsItsWorkers = false;
};

struct RunEnd {
  int trial = 0;
  int code = -1;  // exit status, -1 when a signal ended it
  int signal = 0;
  double seconds = 0;        // how long it ran
  bool stopped = false;      // stop() was called for it
  bool interrupted = false;  // a run of an earlier tuner process, found RUNNING on --resume
  bool ok() const { return code == 0; }
  std::string describe() const;  // "exited with code 3", "was killed by signal 9 (Killed)"
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string describe() const = 0;  // "local, 2 slots"
  virtual int capacity() const = 0;
  virtual int freeSlots() const = 0;
  // Starts a run; returns where it runs ("localhost"). Throws Error when it cannot start.
  virtual std::string start(const RunSpec& run) = 0;
  // Asks the run of `trial` to end (SIGTERM to its process group, SIGKILL after `grace`); its end
  // comes through wait().
  virtual void stop(int trial, std::chrono::milliseconds grace) = 0;
  // Waits up to `timeout` for runs to end and returns those that did (possibly none).
  virtual std::vector<RunEnd> wait(std::chrono::milliseconds timeout) = 0;
  // Stops every run and waits for them.
  virtual void stopAll() = 0;
};

// Runs on this host with `slots` slots. Every run leads its own process group (a gyre train
// trial's workers with it) and dies with the tuner (PR_SET_PDEATHSIG). `gyre` is this gyre
// executable, for runs that are gyre jobs.
std::unique_ptr<Executor> makeLocalExecutor(int slots, const std::string& gyre);

// Runs on other hosts (`gyre tune -H host1:2,host2:2`), each run a `gyre run -H HOST` job started
// from here through `rshAgent` (ssh by default) with gyre run's agents, placed on the host with the
// most free slots. The experiment directory must be on a file system every host shares, as Ray
// Tune's storage path: trials write their reports and checkpoints there.
std::unique_ptr<Executor> makeHostsExecutor(std::vector<launcher::HostSlots> hosts, const std::string& gyre,
                                            const std::string& rshAgent);

struct SlurmOptions {
  std::string partition;  // empty: the cluster's default
  int slots = 0;          // CPUs the tuner's jobs may hold at once; 0: the partition's CPUs (sinfo)
  std::chrono::milliseconds poll{500};  // between squeue calls
  // The experiment directory: jobs are named gyre-tune-TAG-TRIAL with TAG a hash of it, and jobs
  // of that name still queued when an executor starts belong to a tuner of this experiment that
  // died (SIGKILL, a lost login node): they are cancelled before anything starts.
  std::string experiment;
};

// Each run an sbatch job: a script in the trial's directory that sets the trial's variables and
// runs its command (under srun with np tasks for a command of several workers; gyre train trials
// ask for one task with np CPUs and start their workers themselves), its output appended to the
// trial's log. Runs are followed with squeue, their end read with scontrol (exit code and signal),
// and stopped with scancel. Throws Error naming the command and what it printed when Slurm cannot
// be reached (`sinfo` fails at start; squeue failing for 30 s in a row later).
std::unique_ptr<Executor> makeSlurmExecutor(const SlurmOptions& o);

}  // namespace gyre::tune
