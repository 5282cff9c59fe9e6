// The parameter servers of a `gyre run --servers S` job (RunOptions::servers): where they run and
// what the launcher says about them. Each generation (generation.h) starts its own S servers, as
// `gyre ps-server` processes under an agent per host (AgentSpec::serverIndices), before its
// workers; it stops them once every worker has exited, or with the workers when the generation is
// stopped. A server that dies while workers run is reported on one line and does not stop the
// job: workers fail over to its backup, and a worker that cannot fails, which stops the job.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/hosts.h"

namespace gyre::launcher {

struct ServerPlacement {
  std::string host;
  bool local = false;
  std::vector<int> indices;  // the servers on this host, ascending
};

// Server i runs on the (i mod H)-th of the H hosts that run workers, so that a server and its
// backup (the next server) are on different hosts whenever there are two or more. With
// `serverHosts` (gyre run --server-hosts), the same over those hosts instead, whether or not they
// run workers (a host is local when isLocalHost says so). Hosts that get no server are left out.
// Throws InvalidArgument when `servers` is positive and there is no host, and as checkServerHosts.
std::vector<ServerPlacement> placeServers(const std::vector<HostPlacement>& workers, int servers,
                                          const std::vector<std::string>& serverHosts = {});

// --server-hosts: every name non-empty and none twice (two agents would serve one host's
// servers, and a server's backup could land beside it). Throws InvalidArgument.
void checkServerHosts(const std::vector<std::string>& serverHosts);

// One server as the launcher sees it.
struct ServerState {
  std::string host;
  pid_t pid = 0;
  bool started = false;
  bool exited = false;
};

// The line (without "gyre run: ") about a server that ended while the workers ran; `how` as
// exitDescription() says it: "ps server 1 (pid 42) on host h was killed by SIGKILL (Killed) after
// 3.2 s; workers fail over to its backup, ps server 2" (with one server: it has no backup).
std::string serverLostLine(int index, int servers, const ServerState& state, const std::string& how);

}  // namespace gyre::launcher
