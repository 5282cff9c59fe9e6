#include "bench_ps_throughput.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/auth.h"
#include "common/clock.h"
#include "gyre/ps.h"
#include "gyre/work.h"

namespace gyre::app {
namespace {

// The phases every worker thread goes through together: all warmed up, then go; or abort when
// one of them failed.
struct Phases {
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  std::atomic<bool> failed{false};  // also read by the workers between steps, without mu
  std::exception_ptr firstError;

  void fail(std::exception_ptr e) {
    std::lock_guard lock(mu);
    if (!firstError) firstError = e;
    failed = true;
    cv.notify_all();
  }
};

struct WorkerThread {
  std::atomic<std::int64_t> completed{0};
  ps::WorkerStats before, after;
  Clock::time_point end;
};

class Point {
 public:
  Point(const ThroughputSettings& s, const std::vector<std::size_t>& keys, int numServers)
      : s_(s), keys_(keys), numServers_(numServers), threads_(static_cast<std::size_t>(s.workers)) {
    spec_.sizes = keys;
    spec_.mode = ps::Mode::parse(s.mode);
    spec_.replicate = s.replicate;
    // With --steps the end is known; with --seconds the main thread sets it when time is up.
    stopAt_ = s.steps > 0 ? s.warmup + s.steps : std::numeric_limits<std::int64_t>::max();
  }

  ThroughputPoint run() {
    const auto timeout = std::chrono::milliseconds(static_cast<long>(s_.timeoutS * 1000));
    const std::string secret = auth::generateSecret();
    std::vector<std::unique_ptr<ps::Server>> servers;
    for (int i = 0; i < numServers_; ++i) {
      ps::ServerOptions o;
      o.index = i;
      o.numServers = numServers_;
      o.bindAddress = "127.0.0.1";
      o.port = 0;
      o.secret = secret;
      o.timeout = timeout;
      servers.push_back(ps::Server::start(o));
      addresses_.push_back(servers.back()->address());
    }
    secret_ = secret;

    std::vector<std::thread> threads;
    for (int w = 0; w < s_.workers; ++w) threads.emplace_back([this, w] { workerMain(w); });
    ThroughputPoint point;
    std::vector<ps::ServerStats> before;
    Clock::time_point start;
    {
      std::unique_lock lock(phases_.mu);
      phases_.cv.wait(lock, [&] { return phases_.ready == s_.workers || phases_.failed.load(); });
      if (!phases_.failed) {
        for (const auto& server : servers) before.push_back(server->stats());
        start = Clock::now();
        phases_.go = true;
        phases_.cv.notify_all();
        if (s_.steps == 0) {
          phases_.cv.wait_for(lock, std::chrono::duration<double>(s_.seconds),
                              [&] { return phases_.failed.load(); });
          stopAt_.store(endStep());
        }
      }
    }
    for (std::thread& t : threads) t.join();
    if (phases_.firstError) std::rethrow_exception(phases_.firstError);

    point.servers = numServers_;
    point.workers = s_.workers;
    Clock::time_point end = start;
    for (const WorkerThread& t : threads_) {
      end = std::max(end, t.end);
      point.steps += static_cast<std::uint64_t>(t.completed.load() - s_.warmup);
      point.bytesPushed += t.after.bytesPushed - t.before.bytesPushed;
      point.bytesPulled += t.after.bytesPulled - t.before.bytesPulled;
      point.clockWaitS += t.after.clockWaitSeconds - t.before.clockWaitSeconds;
    }
    point.seconds = std::chrono::duration<double>(end - start).count();
    point.staleness.assign(ps::WorkerStats::kMaxStaleness + 1, 0);
    for (std::size_t i = 0; i < servers.size(); ++i) {
      const ps::ServerStats after = servers[i]->stats();
      point.serverUpdates.push_back(after.updates - before[i].updates);
      point.serverReplicated.push_back(after.replicated - before[i].replicated);
      point.serverBytes.push_back(after.bytesIn + after.bytesOut - before[i].bytesIn - before[i].bytesOut);
      for (std::size_t k = 0; k < point.staleness.size() && k < after.staleness.size(); ++k)
        point.staleness[k] += after.staleness[k] - before[i].staleness[k];
    }
    return point;
  }

 private:
  // The step every worker ends on once time is up: past the furthest worker by more than any
  // worker can be ahead of another (one step under bsp, s + 1 under ssp:s; asp never blocks),
  // so that no worker is left waiting on one that already stopped. Workers read stopAt_ after
  // every step and take microseconds or more per step, while this reads their counts at once.
  std::int64_t endStep() const {
    std::int64_t furthest = 0;
    for (const WorkerThread& t : threads_) furthest = std::max(furthest, t.completed.load());
    const int slack = spec_.mode.consistency == ps::Consistency::kSsp ? spec_.mode.staleness : 0;
    return furthest + 2 + slack;
  }

  void workerMain(int id) {
    WorkerThread& me = threads_[static_cast<std::size_t>(id)];
    try {
      ps::WorkerOptions o;
      o.workerId = id;
      o.numWorkers = s_.workers;
      o.servers = addresses_;
      o.secret = secret_;
      o.timeout = std::chrono::milliseconds(static_cast<long>(s_.timeoutS * 1000));
      const std::unique_ptr<ps::Worker> worker = ps::Worker::connect(o, spec_);
      // Small gradients, so the parameters stay finite however long it runs.
      std::vector<std::vector<float>> grads, params;
      for (std::size_t size : keys_) {
        grads.emplace_back(size, 1e-4f);
        params.emplace_back(size, 0.0f);
      }
      if (id == 0)
        for (std::size_t k = 0; k < keys_.size(); ++k) {
          const std::vector<float> init(keys_[k], 0.01f);
          worker->init(static_cast<int>(k), init.data())->wait();
        }
      std::vector<std::shared_ptr<Work>> pending;
      auto step = [&] {
        pending.clear();
        for (std::size_t k = 0; k < keys_.size(); ++k) {
          pending.push_back(worker->push(static_cast<int>(k), grads[k].data(), 0.01f));
          pending.push_back(worker->pull(static_cast<int>(k), params[k].data()));
        }
        for (const auto& work : pending) work->wait();
        worker->clock();
        me.completed.store(worker->steps());
      };
      for (int i = 0; i < s_.warmup; ++i) step();
      me.before = worker->stats();
      {
        std::unique_lock lock(phases_.mu);
        ++phases_.ready;
        phases_.cv.notify_all();
        phases_.cv.wait(lock, [&] { return phases_.go || phases_.failed.load(); });
        if (phases_.failed) return;
      }
      while (me.completed.load() < stopAt_.load()) {
        step();
        if (phases_.failed) return;  // another worker failed: stop early
      }
      me.end = Clock::now();
      me.after = worker->stats();
    } catch (...) {
      phases_.fail(std::current_exception());
    }
  }

  const ThroughputSettings& s_;
  const std::vector<std::size_t>& keys_;
  const int numServers_;
  ps::TableSpec spec_;
  std::vector<std::string> addresses_;
  std::string secret_;
  std::vector<WorkerThread> threads_;
  std::atomic<std::int64_t> stopAt_;
  Phases phases_;
};

}  // namespace

ThroughputPoint measureThroughput(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                  int numServers) {
  Point point(s, keySizes, numServers);
  return point.run();
}

int runThroughputPart(const PsBenchFlags& f, const PsMachine& m) {
  const ThroughputSettings& s = f.throughput;
  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  if (!f.json) {
    fmt::print("== parameter-server throughput versus servers\n{}\n{}", throughputSettingsText(s, keys, m),
               throughputHeader(s));
    std::fflush(stdout);
  }
  std::vector<ThroughputPoint> points;
  for (int servers : s.servers) {
    try {
      points.push_back(measureThroughput(s, keys, servers));
    } catch (const std::exception& e) {
      fmt::print(stderr, "gyre bench ps: the throughput point with {} server{} failed: {}\n", servers,
                 servers == 1 ? "" : "s", e.what());
      return 1;
    }
    if (!f.json) {
      const ThroughputPoint* ref = throughputReference(points);
      fmt::print("{}", throughputRow(points.back(), ref ? std::optional(ref->stepsPerS()) : std::nullopt));
      std::fflush(stdout);
    }
  }
  if (f.json)
    fmt::print("{}\n", throughputJson(s, keys, points, m).dump());
  else
    fmt::print(
        "speedup: steps/s against the fewest servers; MB/s: pushed + pulled bytes of all workers; stale: "
        "the servers' staleness per update (mean/p50/p99/max).\n{}",
        throughputSummary(points, m));
  std::fflush(stdout);
  return 0;
}

}  // namespace gyre::app
