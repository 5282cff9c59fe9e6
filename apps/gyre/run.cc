#include "run.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "common/check.h"
#include "common/config.h"
#include "gyre/init.h"
#include "launcher/agent.h"
#include "launcher/agent_protocol.h"
#include "launcher/job.h"
#include "launcher/slurm_allocation.h"

namespace gyre::app {
namespace {

struct RunFlags {
  int np = 0;
  std::string hosts;
  std::string hostfile;
  std::string rshAgent = "ssh -o BatchMode=yes";
  bool rshAgentGiven = false;
  std::string networkInterface;
  bool tagOutput = false;
  bool noTagOutput = false;
  std::string outputDir;
  double timeoutS = 0;
  double startTimeoutS = 30;
  int threads = 0;
  int maxRestarts = 0;
  bool keepGoing = false;
  int servers = 0;
  int metricsPort = 0;
  std::string serverHosts;
  bool elastic = false;
  int minNp = 0;
  int maxNp = 0;
  std::string discoveryScript;
  double discoveryIntervalS = 1;
  double elasticTimeoutS = 600;
  std::string rdzv;
  std::vector<std::string> elasticOnlyGiven;  // the elastic flags given, to refuse them without --elastic
  std::vector<std::string> exports;
  std::string gyrePath;
  std::vector<std::string> program;
};

launcher::RunOptions toOptions(const RunFlags& f) {
  launcher::RunOptions o;
  GYRE_USAGE_CHECK(f.hosts.empty() || f.hostfile.empty(), "give -H or --hostfile, not both");
  if (!f.hosts.empty()) o.hosts = launcher::parseHostList(f.hosts);
  if (!f.hostfile.empty()) {
    std::ifstream in(f.hostfile);
    GYRE_USAGE_CHECK(in.good(), "--hostfile: cannot read ", f.hostfile);
    std::stringstream text;
    text << in.rdbuf();
    o.hosts = launcher::parseHostfile(text.str(), f.hostfile);
  }
  o.np = f.np;
  o.rshAgent = launcher::splitCommandLine(f.rshAgent);
  GYRE_USAGE_CHECK(!o.rshAgent.empty(), "--rsh-agent is empty");
  if (f.hosts.empty() && f.hostfile.empty() && f.discoveryScript.empty()) {
    if (const auto allocation = launcher::slurmAllocation(config::processEnvironment())) {
      o.hosts = allocation->nodes;
      int slots = 0;
      for (const auto& node : o.hosts) slots += node.slots;
      GYRE_USAGE_CHECK(f.np <= slots, "-np ", f.np, " asks for more workers than the ", slots,
                       " tasks of Slurm job ", allocation->jobId, " (SLURM_TASKS_PER_NODE=",
                       allocation->tasksPerNode.empty() ? "unset: 1 a node" : allocation->tasksPerNode,
                       "); ask sbatch or salloc for them (-n, --ntasks-per-node), or give -H");
      if (!f.rshAgentGiven) {
        o.rshAgent = launcher::srunAgentCommand();
        o.srunAgents = true;
      }
    }
  }
  o.networkInterface = f.networkInterface;
  GYRE_USAGE_CHECK(!(f.tagOutput && f.noTagOutput), "give --tag-output or --no-tag-output, not both");
  if (f.tagOutput || f.noTagOutput) o.tagOutput = f.tagOutput;
  o.outputDir = f.outputDir;
  o.timeoutS = f.timeoutS;
  o.startTimeoutS = f.startTimeoutS;
  o.threads = f.threads;
  o.maxRestarts = f.maxRestarts;
  o.keepGoing = f.keepGoing;  // checked by runJob
  o.servers = f.servers;  // checked by runJob
  GYRE_USAGE_CHECK(f.metricsPort >= 0 && f.metricsPort <= 65535,
                   "--metrics-port must be a port in [0, 65535]; got ", f.metricsPort);
  o.metricsPort = f.metricsPort;
  if (!f.serverHosts.empty()) {
    std::stringstream list(f.serverHosts);
    for (std::string host; std::getline(list, host, ',');) o.serverHosts.push_back(host);
    if (f.serverHosts.back() == ',') o.serverHosts.push_back("");  // refused by runJob, as is an empty name
  }
  GYRE_USAGE_CHECK(f.elastic || f.elasticOnlyGiven.empty(),
                   f.elasticOnlyGiven.empty() ? "" : f.elasticOnlyGiven[0], " needs --elastic");
  GYRE_USAGE_CHECK(f.discoveryScript.empty() || (f.hosts.empty() && f.hostfile.empty()),
                   "give --host-discovery-script or -H/--hostfile, not both");
  for (const std::string& name : f.elasticOnlyGiven)
    GYRE_USAGE_CHECK((name != "--min-np" || f.minNp >= 1) && (name != "--max-np" || f.maxNp >= 1), name,
                     " must be at least 1");
  GYRE_USAGE_CHECK(f.rdzv.empty() || f.elastic, "--rdzv needs --elastic, with --min-np and --max-np");
  o.rdzv = f.rdzv;
  // GYRE_RDZV, exported for a shell's elastic jobs, leaves its other jobs alone.
  if (o.rdzv.empty() && f.elastic) o.rdzv = config::getString(config::processEnvironment(), "GYRE_RDZV");
  o.elastic = f.elastic;
  o.minNp = f.minNp;
  o.maxNp = f.maxNp;
  o.discoveryScript = f.discoveryScript;
  o.discoveryIntervalS = f.discoveryIntervalS;
  o.elasticTimeoutS = f.elasticTimeoutS;
  for (const std::string& x : f.exports) {
    const auto eq = x.find('=');
    const std::string name = x.substr(0, eq);
    GYRE_USAGE_CHECK(!name.empty(), "-x '", x, "': expected NAME or NAME=VALUE");
    if (eq != std::string::npos) {
      o.exports.emplace_back(name, x.substr(eq + 1));
    } else {
      const char* value = std::getenv(name.c_str());
      GYRE_USAGE_CHECK(value != nullptr, "-x ", name, ": the variable is not set here; give -x ", name,
                       "=VALUE");
      o.exports.emplace_back(name, value);
    }
  }
  o.remoteGyre = f.gyrePath;
  o.program = f.program;
  GYRE_USAGE_CHECK(!o.program.empty(), "no program given: gyre run [options] -- PROGRAM [ARGS...]");
  return o;
}

}  // namespace

void addRun(CLI::App& app, std::function<int()>& action) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Start a distributed job's workers on this host or many, supervise them, and restart "
      "them all when one fails (--max-restarts), or go on without it (--elastic)");
  cmd->footer(
      "Every worker gets GYRE_RANK, GYRE_WORLD_SIZE, GYRE_LOCAL_RANK, GYRE_LOCAL_SIZE, the job's store\n"
      "address and secret, and GYRE_NUM_THREADS (also OMP_NUM_THREADS, MKL_NUM_THREADS and\n"
      "OPENBLAS_NUM_THREADS unless set); gyre::init() reads them. If a worker fails, the others are\n"
      "stopped and gyre run exits with its code. With --max-restarts K, a failed job is started again\n"
      "instead, up to K times: every worker anew, with a fresh store and secret, and GYRE_RESTART_COUNT\n"
      "set to the generation (0, 1, ...); programs resume from their own checkpoints. Ctrl-C and\n"
      "--timeout (which bounds all generations together) are never restarted. See docs/gyre-run.md.\n\n"
      "Examples:\n"
      "  gyre run -np 4 -- ./train --epochs 3\n"
      "  gyre run -H node1:2,node2:2 --network-interface eth0 -- /shared/train\n"
      "  gyre run --hostfile hosts.txt --rsh-agent 'ssh -p 2222' --output-dir logs -- ./train\n"
      "  gyre run -np 4 --max-restarts 3 -- ./train --resume\n"
      "  gyre run --elastic -np 4 --min-np 2 --max-np 8 --max-restarts 2 -H a:4,b:4 -- ./train\n"
      "  gyre run -np 4 --servers 2 -- ./train_ps\n"
      "  gyre run -H w1,w2 --servers 2 --server-hosts s1,s2 -- ./train_ps\n\n"
      "With --servers S, S parameter server processes run beside the workers (round-robin over their\n"
      "hosts, or over --server-hosts; output tagged [ps0], [ps1], ...); workers get GYRE_PS_SERVERS and\n"
      "reach them with gyre::ps::Worker::fromEnvironment. The job ends when every worker has exited;\n"
      "then the servers are stopped. A server that dies is reported and does not stop the job: workers\n"
      "fail over to its backup. See docs/gyre-run.md, \"Parameter servers\".\n\n"
      "With --elastic, a lost worker does not stop the job: the others go on in a new membership as\n"
      "long as at least --min-np remain, replacements are started while --max-restarts allows, and\n"
      "workers on hosts that --host-discovery-script adds join at the next commit. Each worker gets\n"
      "GYRE_ELASTIC=1, its id (0, 1, ... in start order) as GYRE_ELASTIC_ID and GYRE_RANK, and\n"
      "GYRE_MIN_NP, GYRE_MAX_NP and GYRE_ELASTIC_TIMEOUT_MS; output lines are tagged with the id.\n\n"
      "Inside a Slurm allocation (sbatch, salloc) and without -H, --hostfile or a discovery script, the\n"
      "hosts are the allocation's nodes (SLURM_JOB_NODELIST) with their tasks (SLURM_TASKS_PER_NODE) as\n"
      "slots, and each node's agent starts as a step of the job (`srun --nodes=1 --ntasks=1 --overlap\n"
      "--cpu-bind=none --nodelist=NODE gyre agent`; --rsh-agent replaces srun), so scancel stops every\n"
      "worker. See docs/launching.md, \"Slurm\".");
  CLI::Option* npOption = cmd->add_option("--np", f->np,
                  "Number of workers (also -np); default: every slot of the hosts, or 1. With --elastic: "
                  "the workers started at first; default --max-np, capped by the slots known at start");
  cmd->add_option("-H,--hosts", f->hosts, "Hosts and their slots: host1:2,host2:2 (slots default to 1)");
  cmd->add_option("--hostfile", f->hostfile,
                  "File with one host per line: `host slots=N`, `host:N` or `host`")
      ->check(CLI::ExistingFile);
  CLI::Option* rshOption =
      cmd->add_option("--rsh-agent", f->rshAgent,
                      "Command that runs a command on another host, as `CMD HOST COMMAND` (like OpenMPI's "
                      "plm_rsh_agent); inside a Slurm allocation the default is srun (see below)")
          ->capture_default_str();
  cmd->add_option("--network-interface", f->networkInterface,
                  "Interface (eth0) or address the workers listen on (GYRE_IFACE); the store listens there "
                  "too when this host has it");
  cmd->add_flag("--tag-output", f->tagOutput,
                "Prefix each output line with [rank]<stdout>: (default: on for more than one worker)");
  cmd->add_flag("--no-tag-output", f->noTagOutput, "Print workers' output lines as they are");
  cmd->add_option("--output-dir", f->outputDir, "Also write each rank's output to DIR/rank.N.log");
  cmd->add_option("--max-restarts", f->maxRestarts,
                  "When a worker fails, stop the others and start all of them again (a new generation, "
                  "with a fresh rendezvous), at most this many times; with --elastic, the most replacement "
                  "workers over the whole job")
      ->envname("GYRE_MAX_RESTARTS")
      ->capture_default_str();
  cmd->add_flag("--keep-going", f->keepGoing,
                "Rank 0 drives the job and the others serve it (gyre::rt, gyre rl): a worker other than rank 0 "
                "that fails is reported and the job goes on; when rank 0 exits the others are stopped, and the "
                "job ends with rank 0's exit code (not with --elastic)");
  cmd->add_option("--servers", f->servers,
                  "Parameter servers to start beside the workers (gyre::ps; not with --elastic)")
      ->capture_default_str();
  cmd->add_option(
         "--metrics-port", f->metricsPort,
         "Serve the job's figures for Prometheus on this port (GET /metrics, all interfaces): workers "
         "running, exits, generation, restarts; parameter server i serves its own on PORT + 1 + i "
         "(0: off; docs/metrics.md)")
      ->capture_default_str();
  cmd->add_option("--server-hosts", f->serverHosts,
                  "Run server i on host i mod N of this list (h1,h2,...; no worker slots needed, reached "
                  "through --rsh-agent) instead of the workers' hosts; needs --servers");
  cmd->add_flag("--elastic", f->elastic,
                "Elastic job: workers may be lost and added while it runs; survivors go on in a new "
                "membership (see below)");
  std::vector<CLI::Option*> elasticOnly;
  elasticOnly.push_back(
      cmd->add_option("--min-np", f->minNp,
                      "Elastic: the fewest workers the job goes on with; below it the workers "
                      "wait for more (required with --elastic)"));
  elasticOnly.push_back(cmd->add_option(
      "--max-np", f->maxNp, "Elastic: the most workers the job grows to (required with --elastic)"));
  elasticOnly.push_back(
      cmd->add_option("--host-discovery-script", f->discoveryScript,
                      "Elastic: a command (run with /bin/sh) that prints the hosts available now, "
                      "one `host` or `host:slots` a line; instead of -H/--hostfile"));
  elasticOnly.push_back(cmd->add_option("--discovery-interval", f->discoveryIntervalS,
                                        "Elastic: seconds between runs of the discovery script")
                            ->capture_default_str());
  elasticOnly.push_back(cmd->add_option("--elastic-timeout", f->elasticTimeoutS,
                                        "Elastic: seconds the job may stay below --min-np before it gives up")
                            ->capture_default_str());
  cmd->add_option(
      "--rdzv", f->rdzv,
      "Elastic: keep the job's state in etcd, etcd://host:port[,host:port...]/JOB, so it survives "
      "the loss of any host; run gyre run --rdzv on every host, -np being its workers (default with "
      "--elastic: GYRE_RDZV)");
  cmd->add_option("--timeout", f->timeoutS,
                  "Stop the whole job after this many seconds, every generation together (0: never)")
      ->capture_default_str();
  cmd->add_option("--start-timeout", f->startTimeoutS,
                  "Seconds a worker may take to reach the store and its peers")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads,
                  "Compute threads per worker (default: cores / workers on the host)")
      ->envname("GYRE_NUM_THREADS");
  cmd->add_option("-x", f->exports,
                  "Pass NAME=VALUE (or NAME, with its value here) to every worker; repeatable")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--gyre-path", f->gyrePath,
                  "Path of the gyre executable on other hosts (default: this one's)");
  cmd->add_option("program", f->program, "The program and its arguments, after --")->required();
  cmd->callback([f, elasticOnly, npOption, rshOption, &action] {
    for (const CLI::Option* option : elasticOnly)
      if (option->count() > 0) f->elasticOnlyGiven.push_back(option->get_name());
    const bool npGiven = npOption->count() > 0;
    f->rshAgentGiven = rshOption->count() > 0;
    action = [f, npGiven] {
      // Inside, 0 means "not given" (every slot); a 0 the user typed is an error, not that.
      GYRE_USAGE_CHECK(!npGiven || f->np >= 1, "-np must be an integer of at least 1; got ", f->np,
                       " (leave it out for every slot of the hosts)");
      return launcher::runJob(toOptions(*f));
    };
  });

  CLI::App* agent = app.add_subcommand("agent", "Per-host helper of gyre run (started by it)");
  agent->group("");
  agent->callback([&action] { action = [] { return launcher::runAgent(STDIN_FILENO, STDOUT_FILENO); }; });
}

}  // namespace gyre::app
