// gyre::serve: any forward pass on tensors behind HTTP, as `gyre serve` serves a trained model
// (docs/serving.md): requests batched dynamically over replicas that may autoscale, the v1, v2 and
// raw-tensor routes, /healthz, /readyz and /metrics, every bad request a 4xx naming the problem.
//
//   gyre::serve::ServedModel model;
//   model.name = "doubler";                 // POST /v1/models/doubler:predict
//   model.rowShape = {4};                   // one row: 4 floats (empty: any shape)
//   model.makeReplica = [] {                // one per replica: replicas compute at once
//     return [](const torch::Tensor& rows) { return rows * 2; };
//   };
//   gyre::serve::ServeOptions o;
//   o.port = 0;                             // any free port
//   o.maxBatchSize = 64;
//   gyre::serve::Server server(std::move(model), o);
//   server.start();                         // serves on a thread of its own
//   ... server.port() ...
//   server.stop();                          // answers what it accepted, then returns
//
// Thread-safety: stop() may be called from any thread, a signal watcher's too; the rest from the
// thread that owns the Server.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gyre/serve/options.h"

namespace gyre::serve {

// One replica's forward pass: [rows, ...] float32 in, [rows, ...] out. Called on the replica's
// thread under torch::NoGradGuard, one batch at a time.
using Forward = std::function<::torch::Tensor(const ::torch::Tensor&)>;

struct ServedModel {
  std::string name;                    // in the URLs
  std::string kind = "callable";       // what /v1/models/NAME reports: "mlp", "cnn", "vit", "torchscript", ...
  std::vector<std::int64_t> rowShape;  // one input row: {1, 28, 28}; empty: whatever the request says
  // A new replica's forward pass (its own copy of the model: replicas compute at once).
  std::function<Forward()> makeReplica;
};

// A run directory of gyre train (its model.pt, rebuilt from config.json's model and shape), a
// model.pt with its config.json beside it, or a TorchScript module (torch.jit.save); each replica
// gets its own copy, in eval mode. `name` overrides the name (default: the built-in model's, or
// the file's stem). Throws gyre::Error naming the file and what is wrong with it.
ServedModel loadServedModel(const std::string& path, const std::string& name = "");

class ModelServer;

class Server {
 public:
  // Makes the replicas (options.replicas, or within [minReplicas, maxReplicas]) and binds
  // options.host:options.port. Throws InvalidArgument for an option out of its range (as
  // `gyre serve` names its flags) or replicaProcesses, gyre::Error when it cannot bind.
  Server(ServedModel model, const ServeOptions& options = {});
  // Stops it, if it serves, as stop() does.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;  // the one it got, for port 0
  // Serves on this thread until stop(); then answers what it accepted and returns.
  void serve();
  // Serves on a thread of its own; requests are accepted from when the constructor returned.
  void start();
  // Stops accepting, answers what it accepted, and (after start()) waits for that to finish.
  void stop();

 private:
  std::unique_ptr<ModelServer> impl_;
  std::thread thread_;
};

}  // namespace gyre::serve
