// The parameter server end to end, in one process: servers as gyre::ps::Server objects, workers
// as threads with their own gyre::ps::Worker. Push/pull across shards, each consistency mode's
// guarantee, and failover with no lost acknowledged update.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "gyre/errors.h"
#include "gyre/ps.h"

namespace gyre::ps {
namespace {

constexpr char kWorkerTestSecret[] = "ps-worker-test-secret";

struct Cluster {
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<std::string> addresses;

  explicit Cluster(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    for (int i = 0; i < n; ++i) {
      ServerOptions o;
      o.index = i;
      o.numServers = n;
      o.secret = kWorkerTestSecret;
      o.timeout = timeout;
      servers.push_back(Server::start(o));
      addresses.push_back(servers.back()->address());
    }
  }

  std::unique_ptr<Worker> worker(int id, int workers, const TableSpec& spec,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    WorkerOptions o;
    o.workerId = id;
    o.numWorkers = workers;
    o.servers = addresses;
    o.secret = kWorkerTestSecret;
    o.timeout = timeout;
    return Worker::connect(o, spec);
  }
};

// Runs fn(worker id) on `n` threads; rethrows the first failure.
void onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::vector<std::vector<float>> initialValues(const TableSpec& spec) {
  std::vector<std::vector<float>> values;
  for (std::size_t k = 0; k < spec.sizes.size(); ++k) {
    values.emplace_back(spec.sizes[k]);
    for (std::size_t i = 0; i < spec.sizes[k]; ++i) values[k][i] = static_cast<float>((k * 31 + i * 7) % 101) / 8.0f;
  }
  return values;
}

void initAll(Worker& worker, const std::vector<std::vector<float>>& values) {
  for (std::size_t k = 0; k < values.size(); ++k) worker.init(static_cast<int>(k), values[k].data())->wait();
}

std::vector<std::vector<float>> pullAll(Worker& worker) {
  std::vector<std::vector<float>> out;
  for (std::size_t k = 0; k < worker.spec().sizes.size(); ++k) out.emplace_back(worker.spec().sizes[k]);
  std::vector<std::shared_ptr<Work>> works;
  for (std::size_t k = 0; k < out.size(); ++k) works.push_back(worker.pull(static_cast<int>(k), out[k].data()));
  for (auto& w : works) w->wait();
  return out;
}

TableSpec table(const std::string& mode) {
  TableSpec spec;
  spec.sizes = {1000, 7, 333, 1, 64};
  spec.mode = Mode::parse(mode);
  return spec;
}

TEST(PsMode, ParsesAndPrints) {
  EXPECT_EQ(Mode::parse("bsp").consistency, Consistency::kBsp);
  EXPECT_EQ(Mode::parse("asp").consistency, Consistency::kAsp);
  EXPECT_EQ(Mode::parse("ssp:3").staleness, 3);
  EXPECT_EQ(Mode::parse("ssp:0").toString(), "ssp:0");
  for (const char* bad : {"", "ssp", "ssp:", "ssp:-1", "ssp:x", "BSP", "async"})
    EXPECT_THROW(Mode::parse(bad), InvalidArgument) << bad;
}

TEST(PsWorker, PushAndPullAcrossShards) {
  Cluster cluster(3);
  const TableSpec spec = table("asp");
  auto worker = cluster.worker(0, 1, spec);
  const auto values = initialValues(spec);
  initAll(*worker, values);
  EXPECT_EQ(pullAll(*worker), values);
  // Every server holds a third of the 1405 parameters.
  std::vector<std::vector<float>> grads;
  for (std::size_t k = 0; k < spec.sizes.size(); ++k) grads.emplace_back(spec.sizes[k], static_cast<float>(k + 1));
  for (std::size_t k = 0; k < grads.size(); ++k) worker->push(static_cast<int>(k), grads[k].data(), 0.5f)->wait();
  const auto after = pullAll(*worker);
  for (std::size_t k = 0; k < grads.size(); ++k)
    for (std::size_t i = 0; i < spec.sizes[k]; ++i) ASSERT_EQ(after[k][i], values[k][i] - 0.5f * grads[k][i]) << k << " " << i;
  std::uint64_t updates = 0;
  for (auto& s : cluster.servers) updates += s->stats().updates;
  EXPECT_GE(updates, spec.sizes.size());  // a key split across servers counts once per slice
  EXPECT_EQ(worker->stats().pushes, updates);
}

TEST(PsWorker, BspEqualsAveragedMomentumSgd) {
  Cluster cluster(2);
  TableSpec spec = table("bsp");
  spec.optimizer.momentum = 0.9f;
  spec.optimizer.weightDecay = 0.01f;
  const int workers = 2, steps = 6;
  const float lr = 0.1f;
  auto grad = [](int worker, int step, std::size_t k, std::size_t i) {
    return std::sin(static_cast<float>(worker * 13 + step * 7 + static_cast<int>(k * 3 + i)));
  };
  const auto values = initialValues(spec);
  std::vector<std::vector<std::vector<float>>> seen(workers);
  onThreads(workers, [&](int id) {
    auto worker = cluster.worker(id, workers, spec);
    if (id == 0) initAll(*worker, values);
    for (int step = 0; step < steps; ++step) {
      auto params = pullAll(*worker);
      std::vector<std::vector<float>> g(spec.sizes.size());
      std::vector<std::shared_ptr<Work>> works;
      for (std::size_t k = 0; k < g.size(); ++k) {
        for (std::size_t i = 0; i < spec.sizes[k]; ++i) g[k].push_back(grad(id, step, k, i));
        works.push_back(worker->push(static_cast<int>(k), g[k].data(), lr));
      }
      worker->clock();
      for (auto& w : works) EXPECT_TRUE(w->isCompleted());
    }
    seen[static_cast<std::size_t>(id)] = pullAll(*worker);
    EXPECT_EQ(worker->stats().staleness[0], worker->stats().pushes);
  });
  // The reference: one process, momentum SGD on the mean gradient.
  auto ref = values;
  auto buf = values;
  for (int step = 0; step < steps; ++step)
    for (std::size_t k = 0; k < ref.size(); ++k)
      for (std::size_t i = 0; i < ref[k].size(); ++i) {
        const float mean = (grad(0, step, k, i) + grad(1, step, k, i)) * 0.5f;
        const float d = mean + 0.01f * ref[k][i];
        buf[k][i] = step == 0 ? d : 0.9f * buf[k][i] + d;
        ref[k][i] -= lr * buf[k][i];
      }
  EXPECT_EQ(seen[0], seen[1]);
  for (std::size_t k = 0; k < ref.size(); ++k)
    for (std::size_t i = 0; i < ref[k].size(); ++i) ASSERT_NEAR(seen[0][k][i], ref[k][i], 1e-5) << k << " " << i;
}

TEST(PsWorker, SspNeverRunsMoreThanSClocksAhead) {
  Cluster cluster(2);
  const int workers = 3, steps = 25, bound = 2;
  TableSpec spec = table("ssp:2");
  std::atomic<int> completed[workers] = {};
  std::atomic<int> maxLead{0};
  std::atomic<bool> violated{false};
  const auto values = initialValues(spec);
  std::atomic<bool> initialized{false};
  onThreads(workers, [&](int id) {
    auto worker = cluster.worker(id, workers, spec);
    if (id == 0) initAll(*worker, values), initialized = true;
    std::vector<float> g(spec.sizes[0], 1.0f);
    for (int step = 0; step < steps; ++step) {
      int slowest = completed[0];
      for (auto& c : completed) slowest = std::min(slowest, c.load());
      const int lead = step - slowest;
      if (lead > bound) violated = true;
      int seen = maxLead;
      while (lead > seen && !maxLead.compare_exchange_weak(seen, lead)) {
      }
      if (id == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the straggler
      std::vector<float> p(spec.sizes[0]);
      worker->pull(0, p.data())->wait();
      worker->push(0, g.data(), 0.01f);
      ++completed[id];  // before clock(): the servers can only know less than this
      worker->clock();
    }
  });
  EXPECT_FALSE(violated) << "a worker started a step more than " << bound << " steps ahead of the slowest";
  EXPECT_EQ(maxLead.load(), bound) << "the fast workers never used the slack ssp allows";
}

TEST(PsWorker, AspRecordsStaleness) {
  Cluster cluster(1);
  const int workers = 2, steps = 30;
  const TableSpec spec = table("asp");
  const auto values = initialValues(spec);
  std::vector<WorkerStats> stats(workers);
  onThreads(workers, [&](int id) {
    auto worker = cluster.worker(id, workers, spec);
    if (id == 0) initAll(*worker, values);
    std::vector<float> p(spec.sizes[0]), g(spec.sizes[0], 0.25f);
    for (int step = 0; step < steps; ++step) {
      worker->pull(0, p.data())->wait();
      worker->push(0, g.data(), 0.1f)->wait();
      worker->clock();
    }
    stats[static_cast<std::size_t>(id)] = worker->stats();
  });
  std::uint64_t total = 0;
  for (auto& s : stats) {
    EXPECT_EQ(s.pushes, std::uint64_t(steps));
    for (auto v : s.staleness) total += v;
  }
  EXPECT_EQ(total, std::uint64_t(workers * steps));
}

TEST(PsWorker, BspPullTimesOutWhenAWorkerNeverPushes) {
  Cluster cluster(1, std::chrono::milliseconds(300));
  const TableSpec spec = table("bsp");
  auto worker = cluster.worker(0, 2, spec, std::chrono::milliseconds(300));
  initAll(*worker, initialValues(spec));
  std::vector<float> g(spec.sizes[0], 1.0f);
  auto push = worker->push(0, g.data(), 0.1f);
  EXPECT_THROW(push->wait(), TimeoutError);
}

TEST(PsWorker, WithoutReplicationNoServerBacksAnother) {
  Cluster cluster(2);
  TableSpec spec = table("asp");
  spec.replicate = false;
  auto worker = cluster.worker(0, 1, spec);
  const auto values = initialValues(spec);
  initAll(*worker, values);
  std::vector<float> g(spec.sizes[0], 1.0f);
  worker->push(0, g.data(), 0.5f)->wait();
  EXPECT_EQ(pullAll(*worker)[0][0], values[0][0] - 0.5f);
  for (auto& s : cluster.servers) EXPECT_EQ(s->stats().replicated, 0u);
  TableSpec replicated = table("asp");
  EXPECT_THROW(cluster.worker(0, 1, replicated), Error);  // the servers hold the other table
}

TEST(PsWorker, RefusesADifferentTable) {
  Cluster cluster(2);
  auto first = cluster.worker(0, 2, table("asp"));
  TableSpec other = table("asp");
  other.sizes.push_back(5);
  try {
    cluster.worker(1, 2, other);
    FAIL() << "a different table was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cluster.worker(2, 2, table("asp")), InvalidArgument);
}

// Kills server 0 in the middle of training; every push is acknowledged (resent to the backup
// after the failover), and the parameters equal an exact replay of all of them: gradients and
// the rate are powers of two, so the sums are exact in any order.
void failoverCase(const std::string& mode) {
  Cluster cluster(2);
  TableSpec spec = table(mode);
  const int workers = 2, steps = 40;
  const float lr = 0.25f;
  const auto values = initialValues(spec);
  std::vector<std::vector<double>> pushed(spec.sizes.size());
  for (std::size_t k = 0; k < pushed.size(); ++k) pushed[k].assign(spec.sizes[k], 0.0);
  std::mutex pushedMu;
  std::vector<std::uint64_t> failovers(workers);
  std::atomic<int> finished{0};
  std::vector<std::vector<float>> params;
  // Every worker stops halfway until the server is gone, so each has steps left to fail over in
  // (under asp a fast worker could otherwise finish before the kill and never see it).
  std::atomic<int> atHalf{0};
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    while (atHalf < workers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    cluster.servers[0].reset();
    killed = true;
  });
  onThreads(workers, [&](int id) {
    auto worker = cluster.worker(id, workers, spec);
    if (id == 0) initAll(*worker, values);
    std::vector<std::vector<float>> g(spec.sizes.size());
    for (int step = 0; step < steps; ++step) {
      if (step == steps / 2) {
        ++atHalf;
        while (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      pullAll(*worker);
      std::vector<std::shared_ptr<Work>> works;
      for (std::size_t k = 0; k < g.size(); ++k) {
        g[k].assign(spec.sizes[k], static_cast<float>(((step + id + static_cast<int>(k)) % 4) + 1) / 4.0f);
        works.push_back(worker->push(static_cast<int>(k), g[k].data(), lr));
      }
      for (auto& w : works) w->wait();  // acknowledged
      {
        std::lock_guard<std::mutex> lock(pushedMu);
        for (std::size_t k = 0; k < g.size(); ++k)
          for (std::size_t i = 0; i < g[k].size(); ++i) pushed[k][i] += g[k][i];
      }
      worker->clock();
    }
    failovers[static_cast<std::size_t>(id)] = worker->stats().failovers;
    ++finished;
    while (finished < workers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (id == 0) params = pullAll(*worker);  // every push of both workers was acknowledged
  });
  killer.join();
  EXPECT_EQ(failovers[0], 1u);
  EXPECT_EQ(failovers[1], 1u);
  for (std::size_t k = 0; k < params.size(); ++k)
    for (std::size_t i = 0; i < params[k].size(); ++i)
      ASSERT_EQ(params[k][i], static_cast<float>(values[k][i] - lr * pushed[k][i] / workers)) << "key " << k << " [" << i << "]";
}

TEST(PsWorker, FailoverLosesNoAcknowledgedUpdateAsp) { failoverCase("asp"); }
TEST(PsWorker, FailoverLosesNoAcknowledgedUpdateBsp) { failoverCase("bsp"); }

}  // namespace
}  // namespace gyre::ps
