// The launcher's side of its agents (agent_protocol.h): starting `gyre agent` on a host (directly
// here, through the rsh agent elsewhere) and handing it its AgentSpec, reading the Events it
// sends, telling it to stop, and reaping it. Shared by a generation of a job (generation.h), which
// runs one agent per host, and an elastic job (elastic_job.h), which runs one per worker.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/socket.h"
#include "launcher/agent_protocol.h"
#include "launcher/failures.h"  // WorkerEnd
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/job_store.h"
#include "launcher/line_reader.h"
#include "launcher/process.h"

namespace gyre::launcher {

// One agent as the launcher sees it.
struct AgentHandle {
  HostPlacement place;
  std::string command;  // how it was started, for messages
  pid_t pid = 0;
  net::Fd toAgent;
  net::Fd fromAgent;
  LineReader lines;
  bool exited = false;
  bool done = false;     // sent kDone: every worker reported
  bool servers = false;  // runs parameter servers (AgentSpec::serverIndices), not workers
  // It exited and what it sent was read to the end.
  bool gone() const { return exited && !fromAgent.valid(); }
};

// The fields of an AgentSpec that every agent of a job gets: the host, job id, store (and its
// addresses for this host), program, environment (forwarded GYRE_* knobs and -x), threads,
// time-outs and interface. The caller sets the workers (worldSize, firstRank, count) and adds
// what is its own.
AgentSpec baseAgentSpec(const RunOptions& options, const JobStore& store, const HostPlacement& place,
                        const std::string& jobId);

// "was killed by SIGKILL (Killed)", "exited with code 127 (the program could not be started)",
// "exited with code 3": how a worker's kExit event reads in messages.
std::string exitDescription(const Event& exit);
// The same with the time it ran ("exited with code 3 after 1.2 s"), whether it exited 0 and the
// code gyre run exits with for it.
WorkerEnd endOf(const Event& exit);

// The agents of a job. Not thread-safe.
class AgentPool {
 public:
  // onEvent gets every event as it arrives; onError what went wrong with an agent (a malformed
  // event, an exception from onEvent, a spec it could not be handed).
  using OnEvent = std::function<void(AgentHandle&, const Event&)>;
  using OnError = std::function<void(AgentHandle&, const std::string&)>;
  AgentPool(const RunOptions& options, OnEvent onEvent, OnError onError)
      : o_(options), onEvent_(std::move(onEvent)), onError_(std::move(onError)) {}

  // Starts an agent for `place` and writes `spec` to it. Throws InvalidArgument when the rsh
  // agent cannot be found.
  AgentHandle& start(const HostPlacement& place, const AgentSpec& spec);
  // How long a job's loop waits in read() before it looks at its deadlines, signals and store.
  static constexpr int kPollMs = 50;
  // Reads what the agents sent, waiting up to waitMs for the first byte.
  void read(int waitMs);
  // The agents that exited since the last call, each after what it sent last was read (bounded:
  // a process the rsh agent left may hold its pipe open).
  std::vector<std::pair<AgentHandle*, ChildExit>> reap();
  // Tells one agent, or every agent, to stop its workers: a "stop" line and the end of its stdin.
  void stop(AgentHandle& agent);
  void stopAll();
  // SIGKILL to every agent still running (after the stop grace).
  void killAll() { group_.stopAll(std::chrono::milliseconds(0)); }
  bool allGone() const;
  bool empty() const { return group_.empty(); }
  const std::vector<std::unique_ptr<AgentHandle>>& agents() const { return agents_; }

 private:
  AgentHandle* byPid(pid_t pid);

  const RunOptions& o_;
  OnEvent onEvent_;
  OnError onError_;
  ProcessGroup group_;
  std::vector<std::unique_ptr<AgentHandle>> agents_;
};

}  // namespace gyre::launcher
