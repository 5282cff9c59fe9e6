// `gyre run`: starts a job's workers on one host or many, wires them together (store, secret,
// environment), relays their output, and supervises them: the first worker that fails stops the
// job, and so do --timeout, SIGINT, SIGTERM and SIGHUP. With --max-restarts K, a failed job is
// started again, as a new generation of all its workers with a fresh rendezvous (a new store and
// secret; generation.h), up to K times. With --elastic, a lost worker does not stop the job: the
// others go on in a new membership (elastic_job.h). With --servers S, parameter servers run beside
// the workers (ps_servers.h). See docs/gyre-run.md.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/hosts.h"

namespace gyre::launcher {

struct RunOptions {
  int np = 0;                    // 0: every slot of `hosts` (1 on this host without hosts)
  std::vector<HostSlots> hosts;  // empty: this host
  // How to start a process on another host: these words, then the host, then one shell command.
  std::vector<std::string> rshAgent = {"ssh", "-o", "BatchMode=yes"};
  // Inside a Slurm allocation (slurm_allocation.h): every host's agent, this host's too, is started
  // as `rshAgent... --nodelist=HOST gyre agent` (srun runs a program, not a shell line), so each
  // node's workers are a step of the job.
  bool srunAgents = false;
  std::string networkInterface;   // GYRE_IFACE for the workers; the store listens there if this host has it
  std::optional<bool> tagOutput;  // default: on for more than one worker
  std::string outputDir;          // one log per rank when not empty
  double timeoutS = 0;            // the whole job; 0: no limit
  double startTimeoutS = 30;      // reaching the store and the peers
  int threads = 0;                // per worker; 0: cores / local workers
  std::vector<std::pair<std::string, std::string>> exports;  // -x NAME=VALUE, for every worker
  std::string remoteGyre;  // the gyre executable on other hosts; default: this one's path
  std::vector<std::string> program;
  int stopGraceMs = 1000;  // workers get SIGTERM, then SIGKILL after this long
  // After a worker fails, start every worker again, at most this many times (torchrun's
  // --max-restarts); interrupts and --timeout are never restarted. Workers get the generation
  // as GYRE_RESTART_COUNT (0 first) and this as GYRE_MAX_RESTARTS.
  int maxRestarts = 0;
  // --keep-going: rank 0 drives the job (a gyre::rt driver, say) and the others serve it. A worker
  // other than rank 0 that fails is reported and the job goes on without it; when rank 0 exits, the
  // others are stopped and the job ends with rank 0's exit code. Not with --elastic.
  bool keepGoing = false;
  // --servers S: S parameter server processes (`gyre ps-server`), placed round-robin over the
  // workers' hosts, alongside the workers; each generation has its own. Workers get
  // GYRE_PS_SERVERS=S (gyre::ps::Worker::fromEnvironment). The job ends when every worker has
  // exited; the servers are then stopped. A server that dies does not stop the job (workers fail
  // over to its backup); it is reported. Not with --elastic.
  int servers = 0;
  // --metrics-port: the launcher serves its job's figures for Prometheus there (run_metrics.h),
  // and parameter server i on metricsPort + 1 + i (GYRE_PS_METRICS_PORT_BASE). 0: off.
  int metricsPort = 0;
  // --server-hosts: with servers > 0, server i runs on serverHosts[i mod size] instead of the
  // workers' hosts (ps_servers.h); these hosts need no worker slots and are reached through
  // rshAgent like the others. Names must be distinct and not empty. Needs servers > 0.
  std::vector<std::string> serverHosts;

  // --elastic (elastic_job.h): workers may be lost and added while the job runs; survivors
  // re-form their world from the memberships the launcher publishes in the job's store. Then np
  // is the first count of workers (0: maxNp, capped by the slots known at start), maxRestarts
  // bounds the replacement workers over the whole job, and each worker's GYRE_RANK is its id.
  bool elastic = false;
  int minNp = 0;                  // the fewest workers the job goes on with; required
  int maxNp = 0;                  // the most it grows to; required
  std::string discoveryScript;    // prints `host` or `host:slots` lines; run through /bin/sh
  double discoveryIntervalS = 1;  // between runs of the discovery script
  double elasticTimeoutS = 600;   // below minNp this long: give up
  // --rdzv etcd://host:port[,...]/JOB (rdzv_job.h): the elastic job's state lives in etcd; every
  // host runs its own gyre run with the same address, np is this host's slots.
  std::string rdzv;
};

// Runs the job to its end, restarts included (or as an elastic job); returns the exit code for
// `gyre run` (0, the last failed worker's code, 128 + its signal, 124 for --timeout, 128 + the
// signal for an interrupt, 1 for launcher errors). --timeout bounds the whole job, every
// generation together. Throws InvalidArgument for bad options.
int runJob(const RunOptions& options);

// The variables of this process's environment that a remote worker should get: every GYRE_*
// knob the user set, except those the launcher sets itself.
std::vector<std::pair<std::string, std::string>> forwardedEnvironment();

}  // namespace gyre::launcher
