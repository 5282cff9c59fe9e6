// The workers of an elastic job on this launcher, one per agent (its id the agent's first rank),
// as gyre run --elastic (elastic_job.h) and each node of gyre run --rdzv (rdzv_job.h) run them:
// their output goes to the job's sink, their starts and exits are counted in RunMetrics, and
// each worker's end (its exit, a start that failed, its agent's error or loss) reaches the job
// once, through onEnd. Not thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "launcher/agent_pool.h"
#include "launcher/failures.h"
#include "launcher/output.h"

namespace gyre::launcher {

class ElasticWorkers {
 public:
  using OnEnd = std::function<void(int id, const WorkerEnd& end)>;
  ElasticWorkers(const RunOptions& options, OnEnd onEnd);

  // Where the workers' lines go; set before the first start.
  void setOutput(OutputSink& sink) { output_ = &sink; }

  // Starts worker `id` under an agent for `place` with `spec`; a start that fails is its end
  // ("could not be started: ...").
  void start(int id, const HostPlacement& place, const AgentSpec& spec);
  // Its agent stops it (nothing when it has ended or never started).
  void stop(int id);
  // Records an end the job learnt elsewhere (nothing when it has ended already).
  void end(int id, const WorkerEnd& end);

  bool has(int id) const { return workers_.contains(id); }
  bool ended(int id) const;
  // The ids of the workers started here, in order.
  std::vector<int> ids() const;

  // One turn of the job's loop: reads the agents' events (waiting up to AgentPool::kPollMs),
  // reaps the agents that are gone, and kills what is left of a stop past its grace.
  void turn();
  // Stops every worker (SIGTERM, then SIGKILL after --stop-grace); once only.
  void stopAll();
  bool stopping() const { return stopping_; }
  bool allGone() const { return agents_.allGone(); }
  // At the end: whatever is left is stopped at once.
  void finish() { agents_.stopAll(); }

 private:
  struct Worker {
    AgentHandle* agent = nullptr;
    std::string failedText;  // the agent's kFailed: why it could not start the worker
    bool ended = false;      // its end went to onEnd
    bool running = false;    // counted in RunMetrics' running workers
  };

  void onEvent(AgentHandle& a, const Event& e);

  const RunOptions& o_;
  OnEnd onEnd_;
  AgentPool agents_;
  OutputSink* output_ = nullptr;
  std::map<int, Worker> workers_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point killAt_{};
};

}  // namespace gyre::launcher
