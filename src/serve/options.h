// `gyre serve`'s options, declared once: the gyre tool's flags and gyre_serve_worker's (the same
// parser), their checks and the arguments the tool hands the worker. libtorch-free: the gyre tool
// links it without libtorch. docs/serving.md describes them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace gyre::serve {

struct ServeOptions {
  // A run directory gyre train wrote (its model.pt and config.json), a model.pt beside its
  // config.json, or a TorchScript module (torch.jit.save).
  std::string model;
  std::string name;  // the model's name in the URLs; default: the built-in model's, or the file's stem
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (the worker prints the one it got)
  int replicas = 1;  // with autoscaling: the count to start with, kept within [min, max]
  // Autoscaling (serve/autoscaler.h): both 0, off; otherwise the replicas follow the requests in
  // flight, targetOngoing per replica, within [minReplicas, maxReplicas].
  int minReplicas = 0;
  int maxReplicas = 0;
  double targetOngoing = 2;
  double upscaleDelayS = 1;
  double downscaleDelayS = 10;
  int maxBatchSize = 32;
  double batchWaitMs = 5;  // how long a request waits for others to fill its batch
  int threads = 1;         // compute threads per replica
  // Each replica in a process of its own, a gyre::rt actor (process_replicas.h): `gyre serve`
  // starts the server and one process per replica (--max-replicas with autoscaling) as a job.
  bool replicaProcesses = false;
  int maxConnections = 64;
  int maxQueue = 1024;  // requests waiting for a replica; beyond it: 503
  std::int64_t maxBodyBytes = 64ll << 20;
  double readTimeoutS = 5;  // a client that sends its request slower than this is dropped
};

// The flags on `app` (the gyre tool's `serve` subcommand, or the worker's own); MODEL positional.
void addServeFlags(CLI::App& app, ServeOptions& o);
// Throws InvalidArgument naming the flag for a value out of its range.
void validateServeOptions(const ServeOptions& o);
// The arguments that give the worker the same options.
std::vector<std::string> serveWorkerArguments(const ServeOptions& o);
// With --replica-processes: the processes that host replicas (beside the server's own).
int replicaProcessCount(const ServeOptions& o);

}  // namespace gyre::serve
