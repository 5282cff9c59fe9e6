// gyre serve's HTTP front: one model behind cpp-httplib, its requests batched (batcher.h) over
// the replicas. Routes:
//   POST /v1/models/NAME:predict   {"instances": [...]} (or raw float32 with X-Gyre-Shape)
//   POST /v2/models/NAME/infer     KServe v2 "inputs" / "outputs"
//   GET  /v1/models/NAME, /v2/models/NAME/ready   the model's status
//   GET  /healthz (alive), /readyz (replicas loaded), /metrics (Prometheus text)
// Every refusal is a JSON {"error": ...} with a 4xx status naming the problem: 400 malformed or
// mis-shaped input, 404 an unknown model or path, 405 a wrong method, 413 a body over
// --max-body-bytes, 415 raw tensors sent to the v2 route, 503 a full queue. A client slower than
// --read-timeout is dropped; the server goes on serving the others.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"

#include "gyre/serve.h"
#include "serve/options.h"

namespace httplib {
class Server;
}

namespace gyre::serve {

class Batcher;
class ConnectionPool;
class LargeDecodes;
class RequestMetrics;

class ModelServer {
 public:
  // Makes the replicas and binds --host:--port. Throws gyre::Error naming --port when it cannot.
  ModelServer(ServedModel model, const ServeOptions& options);
  ~ModelServer();

  int port() const { return port_; }
  // Serves until stop() (from another thread or a signal watcher); then answers what it accepted.
  void serve();
  void stop();

 private:
  void routes();

  // --min/--max-replicas: every 100 ms, the replicas the requests in flight want (autoscaler.h).
  void autoscale() GYRE_EXCLUDES(mu_);
  void stopAutoscaler() GYRE_EXCLUDES(mu_);

  ServedModel model_;
  ServeOptions o_;
  std::unique_ptr<Batcher> batcher_;
  Mutex mu_;
  CondVar stopped_;
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  std::thread autoscaler_;
  std::unique_ptr<RequestMetrics> metrics_;
  std::unique_ptr<LargeDecodes> largeDecodes_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<ConnectionPool*> connections_{nullptr};  // httplib's, while it listens
  std::atomic<bool> serving_{false};        // in serve()
  std::atomic<bool> stopRequested_{false};  // stop() was called
};

}  // namespace gyre::serve
