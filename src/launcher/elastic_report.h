// How `gyre run --elastic` reports the end of a job on stderr, in the style of the non-elastic
// path (job.cc): the cause with its worker's last output lines (or its log), the failures after
// it, and the story of the job (memberships, losses, replacements) when it did not succeed.
#pragma once

#include <string>

#include "launcher/elastic_policy.h"
#include "launcher/job.h"
#include "launcher/output.h"

namespace gyre::launcher {

// What stopped the job besides the policy.
struct ElasticEnding {
  int interrupt = 0;          // SIGINT, SIGTERM or SIGHUP
  bool timedOut = false;      // --timeout
  std::string launcherError;  // the launcher's own failure (the store, the discovery script)
};

// Prints the report and returns gyre run's exit code (see runElasticJob).
int reportElasticJob(const RunOptions& options, const ElasticOutcome& outcome, const ElasticEnding& ending,
                     const OutputSink& output);

}  // namespace gyre::launcher
