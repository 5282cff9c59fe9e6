// `gyre run --elastic`: a job whose workers may be lost and added while it runs (Horovod
// Elastic's launcher side). One store and secret for the whole job, no generations: each worker
// runs under an agent of its own (so workers come and go one by one), announces in the store
// that it waits to join, and trains in the memberships the launcher publishes there
// (elastic/membership.h); survivors of a lost worker re-form their world at the next
// membership, newcomers (replacements, workers on discovered hosts) join at the survivors' next
// commit. What to do when is ElasticPolicy's (elastic_policy.h); this runs the processes, the
// store and the discovery script, and reports how the job ended. See docs/gyre-run.md.
#pragma once

#include <string>

#include "launcher/agent_protocol.h"
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/job_store.h"
#include "launcher/process.h"

namespace gyre::launcher {

// What the agent of elastic worker `place.firstRank` (its id) gets: the job's base spec, one
// worker, the elastic variables (GYRE_ELASTIC, GYRE_ELASTIC_ID, GYRE_MIN_NP, GYRE_MAX_NP,
// GYRE_ELASTIC_TIMEOUT_MS), and `coreShare` workers sharing the host's cores. Shared with
// gyre run --rdzv (rdzv_job.h).
AgentSpec elasticWorkerSpec(const RunOptions& options, const JobStore& store, const HostPlacement& place,
                            const std::string& jobId, int coreShare);

// How a worker reads whose agent exited before reporting the worker's exit: `failedText` is the
// agent's kFailed text, if it sent one.
std::string lostAgentText(const std::string& failedText, const std::string& agentCommand,
                          const ChildExit& exit);

// Runs an elastic job (options.elastic) to its end; returns gyre run's exit code: 0 when it
// finished (a worker exited 0, every worker exited, and every failure before that was
// tolerated), the failure's code when a worker failed after the finish began or every worker was
// lost, 1 when the launcher gave up (below --min-np past --elastic-timeout; the first membership
// not formed within --start-timeout), 124 for --timeout, 128 + the signal for an interrupt.
// Throws InvalidArgument for bad options (checked here: --min-np, --max-np, -np against the
// slots known at start, the discovery flags).
int runElasticJob(const RunOptions& options);

}  // namespace gyre::launcher
