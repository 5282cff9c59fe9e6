#include "serve/server.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <string_view>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/mutex.h"
#include "serve/autoscaler.h"
#include "serve/batcher.h"
#include "serve/codec.h"

namespace gyre::serve {

using Clock = std::chrono::steady_clock;

// JSON bodies over kLargeBody are parsed off the ingress's thread, kDecodeThreads at a time: a
// parsed JSON value takes several times its text's bytes, so --max-connections of them at once
// would hold connections x body x that factor. Once one is done, freed memory goes back to the
// system.
constexpr std::size_t kLargeBody = std::size_t{64} << 10;
constexpr int kDecodeThreads = 2;

class DecodePool {
 public:
  DecodePool() {
    for (int i = 0; i < kDecodeThreads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~DecodePool() {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    ready_.notifyAll();
    for (std::thread& t : threads_) t.join();
  }

  void run(std::function<void()> job) GYRE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      jobs_.push_back(std::move(job));
    }
    ready_.notifyOne();
  }

 private:
  void work() GYRE_EXCLUDES(mu_) {
    while (true) {
      std::function<void()> job;
      {
        MutexLock lock(mu_);
        ready_.wait(mu_, [&]() GYRE_REQUIRES(mu_) { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      try {
        job();  // answers its request, whatever it throws (ModelServer::predict)
      } catch (...) {
      }
      job = nullptr;  // what it held goes before the trim
      ::malloc_trim(0);
    }
  }

  Mutex mu_;
  CondVar ready_;
  std::deque<std::function<void()>> jobs_ GYRE_GUARDED_BY(mu_);
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
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
        "# HELP gyre_serve_forward_seconds_total Time in forward passes, every replica's together.\n"
        "# TYPE gyre_serve_forward_seconds_total counter\ngyre_serve_forward_seconds_total {}\n"
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
        b.batches, b.rows, b.forwardSeconds, b.failedBatches, b.queued, b.replicas, b.busy, refused);
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

HttpResponse failure(int status, const std::string& what) {
  HttpResponse r;
  r.status = status;
  r.body = errorJson(what);
  return r;
}

// What a prediction that threw answers.
HttpResponse failure(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const BadRequest& x) {
    return failure(x.status(), x.what());
  } catch (const QueueFull& x) {
    return failure(503, x.what());
  } catch (const c10::Error& x) {
    return failure(400, std::string("the model could not take the input: ") + x.what_without_backtrace());
  } catch (const std::exception& x) {
    return failure(500, x.what());
  } catch (...) {
    return failure(500, "an unknown error");
  }
}

HttpResponse json(std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  return r;
}

std::string contentType(const HttpRequest& req) {
  std::string type = req.header("content-type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  return type;
}

// NAME in PATH = PREFIX NAME SUFFIX, NAME without '/' (nor ':' in v1's); false when PATH is not that.
bool nameIn(const std::string& path, std::string_view prefix, std::string_view suffix, std::string_view banned,
            std::string& name) {
  if (path.size() <= prefix.size() + suffix.size() || !path.starts_with(prefix) || !path.ends_with(suffix))
    return false;
  name = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  return name.find_first_of(banned) == std::string::npos;
}

}  // namespace

ModelServer::ModelServer(ServedModel model, const ServeOptions& options)
    : model_(std::move(model)), o_(options), metrics_(std::make_unique<RequestMetrics>()),
      decodes_(std::make_unique<DecodePool>()) {
  HttpServerOptions h;
  h.limits.maxBodyBytes = static_cast<std::size_t>(o_.maxBodyBytes);
  h.maxConnections = o_.maxConnections;
  h.requestTimeout = std::chrono::milliseconds(static_cast<std::int64_t>(o_.readTimeoutS * 1000));
  h.idleTimeout = std::chrono::seconds(5);
  h.timeoutMessage = fmt::format("the request did not arrive whole within --read-timeout ({:g} s)", o_.readTimeoutS);
  h.overflowMessage =
      fmt::format("all --max-connections ({}) connections are being served; try again", o_.maxConnections);
  h.refusal = [](int status, const std::string& why) {
    HttpResponse r = failure(status, why);
    r.close = true;
    return r;
  };
  http_ = std::make_unique<HttpServer>(std::move(h), [this](HttpRequest&& request, Reply reply) {
    handle(std::move(request), std::move(reply));
  });
  port_ = http_->listen(o_.host, o_.port, "--port");  // a port taken fails before any replica loads
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

ModelServer::~ModelServer() {
  stopAutoscaler();
  // Decodes may still submit to the batcher, whose answers record into metrics_: in that order.
  decodes_.reset();
  batcher_.reset();
}

void ModelServer::serve() {
  http_->serve();  // returns once every accepted request is answered
  ready_ = false;
  stopAutoscaler();
  decodes_.reset();  // a decode thread may still be inside the batcher's submit
  batcher_.reset();  // stops the replicas
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

void ModelServer::stop() { http_->stop(); }

void ModelServer::predict(HttpRequest& req, const Reply& reply, bool v1) {
  try {
    // Raw float32 by its content type; anything else is read as JSON (curl -d sends JSON as a form).
    const bool raw = contentType(req) == "application/octet-stream";
    if (raw && !v1) throw BadRequest("raw tensors go to /v1/models/" + model_.name + ":predict", 415);
    const ::torch::Tensor rows = raw  ? decodeRaw(req.body, req.header(kShapeHeader), model_.rowShape)
                                 : v1 ? decodeV1(req.body, model_.rowShape)
                                      : decodeV2(req.body, model_.rowShape);
    req.body = std::string();  // not held while the rows wait
    batcher_->submit(rows, [this, reply, raw, v1](::torch::Tensor output, std::exception_ptr error) {
      if (error) return reply(failure(error));
      try {
        HttpResponse r;
        if (raw) {
          r.headers.emplace_back(kShapeHeader, shapeText(output));
          r.contentType = "application/octet-stream";
          r.body = encodeRaw(output);
        } else {
          r.body = v1 ? encodeV1(output) : encodeV2(output, model_.name);
        }
        reply(std::move(r));
      } catch (...) {
        reply(failure(std::current_exception()));
      }
    });
  } catch (...) {
    reply(failure(std::current_exception()));
  }
}

void ModelServer::handle(HttpRequest&& req, Reply reply) {
  const std::string& path = req.path;
  std::string name;
  const bool v1 = nameIn(path, "/v1/models/", ":predict", "/:", name);
  if (v1 || nameIn(path, "/v2/models/", "/infer", "/", name)) {
    if (req.method != "POST") return reply(failure(405, req.method + " " + path + " is not served (POST is)"));
    // Every prediction's status and time, for /metrics.
    Reply answer = [this, reply = std::move(reply), start = Clock::now()](HttpResponse r) {
      metrics_->record(r.status, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      reply(std::move(r));
    };
    if (name != model_.name)
      return answer(failure(404, "no model '" + name + "' here; this server serves '" + model_.name + "'"));
    if (req.body.size() <= kLargeBody) return predict(req, answer, v1);
    return decodes_->run([this, req = std::move(req), answer, v1]() mutable { predict(req, answer, v1); });
  }
  const bool get = req.method == "GET" || req.method == "HEAD";  // the ingress leaves a HEAD's body out
  const auto only = [&](auto&& answer) {
    if (!get) return reply(failure(405, req.method + " " + path + " is not served (GET is)"));
    answer();
  };
  if (nameIn(path, "/v1/models/", "", "/:", name) || nameIn(path, "/v2/models/", "/ready", "/", name)) {
    return only([&] {
      if (name != model_.name)
        return reply(failure(404, "no model '" + name + "' here; this server serves '" + model_.name + "'"));
      reply(json(nlohmann::json{{"name", model_.name}, {"ready", ready_.load()}, {"platform", model_.kind}}.dump()));
    });
  }
  if (path == "/healthz") return only([&] { reply(json("{\"status\":\"alive\"}")); });
  if (path == "/readyz") {
    return only([&] {
      if (!ready_) return reply(failure(503, "not ready"));
      reply(json("{\"status\":\"ready\"}"));
    });
  }
  if (path == "/metrics") {
    return only([&] {
      const BatchStats b = batcher_ ? batcher_->stats() : BatchStats{};
      HttpResponse r;
      r.contentType = "text/plain; version=0.0.4; charset=utf-8";
      r.body = metrics_->render(b, http_->refused());
      reply(std::move(r));
    });
  }
  reply(failure(404, "no such path: " + req.method + " " + path));
}

}  // namespace gyre::serve
