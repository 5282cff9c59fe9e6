#include "launcher/slurm_allocation.h"

#include "api/launch_env.h"
#include "common/check.h"

namespace gyre::launcher {
namespace {

std::string lookup(const std::map<std::string, std::string>& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace

std::optional<SlurmAllocation> slurmAllocation(const std::map<std::string, std::string>& env) {
  SlurmAllocation a;
  a.jobId = lookup(env, "SLURM_JOB_ID");
  if (a.jobId.empty()) a.jobId = lookup(env, "SLURM_JOBID");
  const std::string nodelist = lookup(env, "SLURM_JOB_NODELIST");
  if (a.jobId.empty() || nodelist.empty()) return std::nullopt;
  const std::vector<std::string> names = launch::expandNodelist(nodelist, "SLURM_JOB_NODELIST");
  a.tasksPerNode = lookup(env, "SLURM_TASKS_PER_NODE");
  std::vector<int> tasks(names.size(), 1);
  if (!a.tasksPerNode.empty()) {
    tasks = launch::expandTasksPerNode(a.tasksPerNode, "SLURM_TASKS_PER_NODE");
    GYRE_USAGE_CHECK(tasks.size() == names.size(), "SLURM_TASKS_PER_NODE='", a.tasksPerNode, "' gives ",
                     tasks.size(), " nodes but SLURM_JOB_NODELIST='", nodelist, "' has ", names.size());
  }
  for (std::size_t i = 0; i < names.size(); ++i) a.nodes.push_back({names[i], tasks[i]});
  return a;
}

std::vector<std::string> srunAgentCommand() {
  // --overlap: the agents share CPUs with the batch step and each other (Slurm >= 20.11);
  // --kill-on-bad-exit: an agent that dies takes its step down. The job's output is the agents'
  // protocol, so srun must add nothing to it (--quiet).
  // --cpu-bind=none: the workers the agent starts inherit its CPU mask; one task bound to one core
  // (task/affinity, task/cgroup) would pin them all there, as OpenMPI's plm_slurm knows.
  return {"srun",   "--nodes=1", "--ntasks=1", "--overlap", "--kill-on-bad-exit=1", "--cpu-bind=none",
          "--quiet"};
}

}  // namespace gyre::launcher
