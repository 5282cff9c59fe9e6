#include "serve/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <malloc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/mutex.h"
#include "metrics/server.h"  // bindHttp
#include "serve/autoscaler.h"
#include "serve/batcher.h"
#include "serve/codec.h"
#include "serve/connections.h"

namespace gyre::serve {

using Clock = std::chrono::steady_clock;

// JSON bodies over kLargeBody are parsed at most kLargeDecodes at a time: a parsed JSON value
// takes several times its text's bytes, so --max-connections of them at once would hold
// connections x body x that factor. Once one is done, freed memory goes back to the system.
constexpr std::size_t kLargeBody = std::size_t{1} << 20;
constexpr int kLargeDecodes = 2;

class LargeDecodes {
 public:
  ::torch::Tensor decode(const std::function<::torch::Tensor()>& f, std::size_t bytes) GYRE_EXCLUDES(mu_) {
    if (bytes <= kLargeBody) return f();
    {
      MutexLock lock(mu_);
      room_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return running_ < kLargeDecodes; });
      ++running_;
    }
    struct Done {
      LargeDecodes& d;
      ~Done() {
        {
          MutexLock lock(d.mu_);
          --d.running_;
        }
        d.room_.notifyOne();
        ::malloc_trim(0);
      }
    } done{*this};
    return f();
  }

 private:
  Mutex mu_;
  CondVar room_;
  int running_ GYRE_GUARDED_BY(mu_) = 0;
};

// Requests by status and their latency, for /metrics.
class RequestMetrics {
 public:
  static constexpr std::array<double, 12> kBucketsMs = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};

  void record(int status, double ms) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++byStatus_[status];
    for (std::size_t i = 0; i < kBucketsMs.size(); ++i)
      if (ms <= kBucketsMs[i]) ++buckets_[i];
    ++count_;
    sumMs_ += ms;
  }

  // `refused`: connections answered 503 beyond --max-connections.
  std::string render(const BatchStats& b, std::uint64_t refused) const GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::string s =
        "# HELP gyre_serve_requests_total Prediction requests answered, by HTTP status.\n"
        "# TYPE gyre_serve_requests_total counter\n";
    for (const auto& [status, n] : byStatus_)
      s += fmt::format("gyre_serve_requests_total{{code=\"{}\"}} {}\n", status, n);
    s += "# HELP gyre_serve_request_seconds Time from a prediction request's arrival to its answer.\n"
         "# TYPE gyre_serve_request_seconds histogram\n";
    for (std::size_t i = 0; i < kBucketsMs.size(); ++i)
      s += fmt::format("gyre_serve_request_seconds_bucket{{le=\"{}\"}} {}\n", kBucketsMs[i] / 1000, buckets_[i]);
    s += fmt::format("gyre_serve_request_seconds_bucket{{le=\"+Inf\"}} {}\n", count_);
    s += fmt::format("gyre_serve_request_seconds_sum {}\ngyre_serve_request_seconds_count {}\n", sumMs_ / 1000,
                     count_);
    s += fmt::format(
        "# HELP gyre_serve_batches_total Forward passes run.\n# TYPE gyre_serve_batches_total counter\n"
        "gyre_serve_batches_total {}\n"
        "# HELP gyre_serve_batch_rows_total Rows of all forward passes.\n# TYPE gyre_serve_batch_rows_total counter\n"
        "gyre_serve_batch_rows_total {}\n"
        "# HELP gyre_serve_failed_batches_total Forward passes that failed.\n"
        "# TYPE gyre_serve_failed_batches_total counter\ngyre_serve_failed_batches_total {}\n"
        "# HELP gyre_serve_queue_length Requests waiting for a replica.\n# TYPE gyre_serve_queue_length gauge\n"
        "gyre_serve_queue_length {}\n"
        "# HELP gyre_serve_replicas Replicas of the model.\n# TYPE gyre_serve_replicas gauge\n"
        "gyre_serve_replicas {}\n"
        "# HELP gyre_serve_busy_replicas Replicas running a forward pass.\n# TYPE gyre_serve_busy_replicas gauge\n"
        "gyre_serve_busy_replicas {}\n"
        "# HELP gyre_serve_refused_connections_total Connections answered 503 beyond --max-connections.\n"
        "# TYPE gyre_serve_refused_connections_total counter\ngyre_serve_refused_connections_total {}\n",
        b.batches, b.rows, b.failedBatches, b.queued, b.replicas, b.busy, refused);
    return s;
  }

 private:
  mutable Mutex mu_;
  std::map<int, std::uint64_t> byStatus_ GYRE_GUARDED_BY(mu_);
  std::array<std::uint64_t, kBucketsMs.size()> buckets_ GYRE_GUARDED_BY(mu_) = {};
  std::uint64_t count_ GYRE_GUARDED_BY(mu_) = 0;
  double sumMs_ GYRE_GUARDED_BY(mu_) = 0;
};

namespace {

void fail(httplib::Response& res, int status, const std::string& what) {
  res.status = status;
  res.set_content(errorJson(what), "application/json");
}

std::string contentType(const httplib::Request& req) {
  std::string type = req.get_header_value("Content-Type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  return type;
}

}  // namespace

ModelServer::ModelServer(ServedModel model, const ServeOptions& options)
    : model_(std::move(model)), o_(options), metrics_(std::make_unique<RequestMetrics>()),
      largeDecodes_(std::make_unique<LargeDecodes>()),
      http_(std::make_unique<httplib::Server>()) {
  http_->set_payload_max_length(static_cast<std::size_t>(o_.maxBodyBytes));
  const auto timeout = std::chrono::microseconds(static_cast<std::int64_t>(o_.readTimeoutS * 1e6));
  http_->set_read_timeout(timeout);
  http_->set_write_timeout(timeout);
  // Answers go out at once: with Nagle's algorithm a small answer waits for the client's delayed
  // ACK (40 ms on Linux).
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);
  const int connections = o_.maxConnections;
  http_->new_task_queue = [this, connections] {
    auto* pool = new ConnectionPool(connections);  // httplib owns it, for the time it listens
    connections_ = pool;
    return pool;
  };
  http_->set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!ConnectionPool::overflowing()) return httplib::Server::HandlerResponse::Unhandled;
    fail(res, 503,
         fmt::format("all --max-connections ({}) connections are being served; try again", o_.maxConnections));
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  routes();
  port_ = metrics::bindHttp(*http_, o_.host, o_.port, "--port");  // a port taken fails before any replica loads
  const int start = o_.minReplicas > 0 ? std::clamp(o_.replicas, o_.minReplicas, o_.maxReplicas) : o_.replicas;
  std::vector<Batcher::Forward> replicas;
  for (int i = 0; i < start; ++i) replicas.push_back(model_.makeReplica());
  BatchOptions b;
  b.maxBatchSize = o_.maxBatchSize;
  b.wait = std::chrono::microseconds(static_cast<std::int64_t>(o_.batchWaitMs * 1000));
  b.maxQueue = o_.maxQueue;
  batcher_ = std::make_unique<Batcher>(std::move(replicas), b);
  ready_ = true;
  if (o_.minReplicas > 0) autoscaler_ = std::thread([this] { autoscale(); });
}

ModelServer::~ModelServer() { stopAutoscaler(); }

void ModelServer::serve() {
  serving_ = true;
  if (!stopRequested_) http_->listen_after_bind();
  serving_ = false;
  ready_ = false;
  stopAutoscaler();
  batcher_.reset();  // answers every accepted request, then stops the replicas
}

void ModelServer::stopAutoscaler() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  stopped_.notifyAll();
  if (autoscaler_.joinable()) autoscaler_.join();
}

void ModelServer::autoscale() {
  AutoscalePolicy policy({.minReplicas = o_.minReplicas,
                          .maxReplicas = o_.maxReplicas,
                          .targetOngoing = o_.targetOngoing,
                          .upscaleDelay = std::chrono::milliseconds(static_cast<std::int64_t>(o_.upscaleDelayS * 1000)),
                          .downscaleDelay = std::chrono::milliseconds(static_cast<std::int64_t>(o_.downscaleDelayS * 1000))});
  UniqueLock lock(mu_);
  while (!stopping_) {
    stopped_.waitFor(mu_, std::chrono::milliseconds(100), [&]() GYRE_REQUIRES(mu_) { return stopping_; });
    if (stopping_) break;
    const BatchStats b = batcher_->stats();
    const double ongoing = b.queued + b.running;
    const int want = policy.decide(AutoscalePolicy::Clock::now(), ongoing, b.replicas);
    if (want == b.replicas) continue;
    std::printf("gyre serve: replicas %d -> %d (%.0f requests in flight, --target-ongoing-requests %g)\n", b.replicas,
                want, ongoing, o_.targetOngoing);
    std::fflush(stdout);
    lock.unlock();  // a replica loads its copy of the model meanwhile
    for (int r = b.replicas; r < want; ++r) batcher_->addReplica(model_.makeReplica());
    for (int r = want; r < b.replicas; ++r) batcher_->removeReplica();
    lock.lock();
  }
}

void ModelServer::stop() {
  // httplib's stop() reaches only a server that listens already: a serve() that has begun but does
  // not listen yet is waited for; one that has not begun sees stopRequested_ and does not listen.
  stopRequested_ = true;
  while (serving_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

void ModelServer::routes() {
  // One prediction: decoded as its protocol and content type say, run in a batch, encoded the same way.
  auto predict = [this](const httplib::Request& req, httplib::Response& res, const std::string& protocol) {
    const Clock::time_point start = Clock::now();
    const std::string asked = req.matches[1];
    if (asked != model_.name) {
      fail(res, 404, "no model '" + asked + "' here; this server serves '" + model_.name + "'");
    } else {
      try {
        // Raw float32 by its content type; anything else is read as JSON (curl -d sends JSON as a form).
        const bool raw = contentType(req) == "application/octet-stream";
        if (raw && protocol != "v1")
          throw BadRequest("raw tensors go to /v1/models/" + model_.name + ":predict", 415);
        const ::torch::Tensor rows =
            raw ? decodeRaw(req.body, req.get_header_value(kShapeHeader), model_.rowShape)
                : largeDecodes_->decode(
                      [&] {
                        return protocol == "v1" ? decodeV1(req.body, model_.rowShape)
                                                : decodeV2(req.body, model_.rowShape);
                      },
                      req.body.size());
        const ::torch::Tensor output = batcher_->submit(rows).get();
        if (raw) {
          res.set_header(kShapeHeader, shapeText(output));
          res.set_content(encodeRaw(output), "application/octet-stream");
        } else {
          res.set_content(protocol == "v1" ? encodeV1(output) : encodeV2(output, model_.name), "application/json");
        }
      } catch (const BadRequest& e) {
        fail(res, e.status(), e.what());
      } catch (const QueueFull& e) {
        fail(res, 503, e.what());
      } catch (const c10::Error& e) {
        fail(res, 400, std::string("the model could not take the input: ") + e.what_without_backtrace());
      } catch (const std::exception& e) {
        fail(res, 500, e.what());
      }
    }
    if (res.status == -1) res.status = 200;  // httplib's "not set yet": a handler that answered
    metrics_->record(res.status, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  };
  http_->Post(R"(/v1/models/([^/:]+):predict)",
              [predict](const httplib::Request& req, httplib::Response& res) { predict(req, res, "v1"); });
  http_->Post(R"(/v2/models/([^/]+)/infer)",
              [predict](const httplib::Request& req, httplib::Response& res) { predict(req, res, "v2"); });
  auto status = [this](const httplib::Request& req, httplib::Response& res) {
    const std::string asked = req.matches[1];
    if (asked != model_.name) return fail(res, 404, "no model '" + asked + "' here; this server serves '" + model_.name + "'");
    res.set_content(nlohmann::json{{"name", model_.name}, {"ready", ready_.load()}, {"platform", model_.kind}}.dump(),
                    "application/json");
  };
  http_->Get(R"(/v1/models/([^/:]+))", status);
  http_->Get(R"(/v2/models/([^/]+)/ready)", status);
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"alive\"}", "application/json");
  });
  http_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return fail(res, 503, "not ready");
    res.set_content("{\"status\":\"ready\"}", "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const BatchStats b = batcher_ ? batcher_->stats() : BatchStats{};
    const ConnectionPool* pool = connections_.load();
    res.set_content(metrics_->render(b, pool != nullptr ? pool->refused() : 0),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  // What no route took, and httplib's own refusals (413 for a body over the limit, 400 for a
  // malformed request line): a JSON error naming it.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    switch (res.status) {
      case 404: return fail(res, 404, "no such path: " + req.method + " " + req.path);
      case 413: return fail(res, 413, "the body is larger than --max-body-bytes");
      default: return fail(res, res.status, "the request was refused (HTTP " + std::to_string(res.status) + ")");
    }
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      fail(res, 500, x.what());
    } catch (...) {
      fail(res, 500, "an unknown error");
    }
  });
}

}  // namespace gyre::serve
