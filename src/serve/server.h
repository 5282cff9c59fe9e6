// gyre serve's HTTP front: one model behind gyre's own ingress (http_server.h), its requests
// batched (batcher.h) over the replicas. Routes:
//   POST /v1/models/NAME:predict   {"instances": [...]} (or raw float32 with X-Gyre-Shape)
//   POST /v2/models/NAME/infer     KServe v2 "inputs" / "outputs"
//   GET  /v1/models/NAME, /v2/models/NAME/ready   the model's status
//   GET  /healthz (alive), /readyz (replicas loaded), /metrics (Prometheus text)
// Every refusal is a JSON {"error": ...} with a 4xx status naming the problem: 400 malformed or
// mis-shaped input, 404 an unknown model or path, 405 a wrong method, 408 a request not whole
// within --read-timeout, 413 a body over --max-body-bytes, 415 raw tensors sent to the v2 route,
// 503 a full queue or connections beyond --max-connections. The server goes on serving the others.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"

#include "gyre/serve.h"
#include "serve/http_server.h"
#include "serve/options.h"

namespace gyre::serve {

class Batcher;
class DecodePool;
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
  using Reply = HttpServer::Reply;

  // On the ingress's thread: routes the request; a prediction is decoded (on the decode pool
  // when its body is large) and submitted, and answered from the replica that computes it.
  void handle(HttpRequest&& request, Reply reply);
  void predict(HttpRequest& request, const Reply& reply, bool v1);

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
  std::unique_ptr<DecodePool> decodes_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
};

}  // namespace gyre::serve
