// What a gyre::serve::Server does (gyre/serve.h): where it listens, its replicas, batching,
// autoscaling and limits. These are `gyre serve`'s flags too (docs/serving.md), with the same
// defaults. libtorch-free.
#pragma once

#include <cstdint>
#include <string>

namespace gyre::serve {

struct ServeOptions {
  // `gyre serve`'s MODEL and --name (a Server takes its model as a ServedModel instead): a run
  // directory gyre train wrote (its model.pt and config.json), a model.pt beside its
  // config.json, or a TorchScript module (torch.jit.save).
  std::string model;
  std::string name;  // the model's name in the URLs; default: the built-in model's, or the file's stem
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (the worker prints the one it got)
  int replicas = 1;  // with autoscaling: the count to start with, kept within [min, max]
  // Autoscaling: both 0, off; otherwise the replicas follow the requests in
  // flight, targetOngoing per replica, within [minReplicas, maxReplicas].
  int minReplicas = 0;
  int maxReplicas = 0;
  double targetOngoing = 2;
  double upscaleDelayS = 1;
  double downscaleDelayS = 10;
  int maxBatchSize = 32;
  double batchWaitMs = 5;  // how long a request waits for others to fill its batch
  int threads = 1;  // compute threads per replica (gyre serve's; a Server computes as its process does)
  // `gyre serve --replica-processes`: each replica in a process of its own, a gyre::rt actor;
  // gyre serve starts the server and one process per replica (--max-replicas with autoscaling)
  // as a job. A Server of gyre/serve.h refuses it (its replicas are threads).
  bool replicaProcesses = false;
  int maxConnections = 1024;  // served at once (a descriptor each); more: 503
  int maxQueue = 1024;  // requests waiting for a replica; beyond it: 503
  std::int64_t maxBodyBytes = 64ll << 20;
  double readTimeoutS = 5;  // from a request's first byte to its last; later: 408, closed
};

}  // namespace gyre::serve
