// `gyre run` inside a Slurm allocation (an sbatch script, salloc): like OpenMPI's mpirun, it takes
// its hosts from the allocation and starts each node's agent as a step of the job with srun, so
// that Slurm tracks, signals and cancels every worker (scancel stops them all).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/hosts.h"

namespace gyre::launcher {

struct SlurmAllocation {
  std::string jobId;             // SLURM_JOB_ID
  std::vector<HostSlots> nodes;  // SLURM_JOB_NODELIST, each with its SLURM_TASKS_PER_NODE
  std::string tasksPerNode;      // as Slurm wrote it, for messages ("2(x3),1")
};

// The allocation this process runs in: SLURM_JOB_ID (or SLURM_JOBID) and SLURM_JOB_NODELIST set,
// task counts from SLURM_TASKS_PER_NODE (1 a node when unset). nullopt outside Slurm. Throws
// InvalidArgument, naming the variable, when a list is malformed or the counts do not match
// the nodes.
std::optional<SlurmAllocation> slurmAllocation(const std::map<std::string, std::string>& env);

// The agent command of a job inside an allocation: one task on one node, sharing the
// allocation's CPUs with the job's other steps; the node and `gyre agent` follow.
std::vector<std::string> srunAgentCommand();

}  // namespace gyre::launcher
