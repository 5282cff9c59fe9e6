#include "bench_ps_launched.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "gyre/communicator.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/ps.h"
#include "gyre/work.h"

namespace gyre::app {
namespace {

// How the workers agree to stop once --seconds are up without any of them blocking on one that
// already stopped: after its c-th timed step every worker posts vote c (1 when its own time is
// up) as an asynchronous max-allreduce, goes on, and reads the outcome of vote c - kStopLag after
// its step c. Every worker reads the same outcome at the same c, so all stop on the same step.
// Waiting for vote c - kStopLag never deadlocks: under bsp the others have completed at least
// c - 1 steps (they posted it); under asp and ssp nobody waits on the worker that waits. It lets
// a worker run up to kStopLag steps ahead of the slowest, which keeps asp nearly uncoupled.
constexpr std::size_t kStopLag = 4;

class StopVotes {
 public:
  explicit StopVotes(Communicator& comm) : comm_(comm) {}

  // After a timed step: posts this step's vote; true when the vote kStopLag steps back was to stop.
  bool after(bool timeUp) {
    votes_.push_back(std::make_unique<Vote>());
    Vote& v = *votes_.back();
    v.value = timeUp ? 1 : 0;
    AllreduceOptions o;
    o.dtype = DataType::kInt32;
    o.op = ReduceOp::kMax;
    v.work = comm_.allreduceAsync(&v.value, &v.value, 1, o);
    if (votes_.size() <= kStopLag) return false;
    votes_.front()->work->wait();
    const bool stop = votes_.front()->value != 0;
    votes_.pop_front();
    return stop;
  }

  // The votes still in flight: every worker posted the same ones.
  void drain() {
    for (const auto& v : votes_) v->work->wait();
    votes_.clear();
  }

 private:
  struct Vote {
    std::int32_t value = 0;
    std::shared_ptr<Work> work;
  };
  Communicator& comm_;
  std::deque<std::unique_ptr<Vote>> votes_;  // unique_ptr: the allreduces write into them
};

}  // namespace

bool launchedWithServers() {
  return config::isSet(config::processEnvironment(), "GYRE_PS_SERVERS");
}

int launchedServerCount() {
  const std::optional<std::int64_t> n =
      config::getOptionalInt(config::processEnvironment(), "GYRE_PS_SERVERS");
  GYRE_USAGE_CHECK(n.has_value(), "GYRE_PS_SERVERS is not set: not a worker of gyre run --servers");
  GYRE_USAGE_CHECK(*n <= 64, "GYRE_PS_SERVERS=", *n, ": the benchmark runs at most 64 servers");
  return static_cast<int>(*n);
}

LaunchedThroughput measureLaunchedThroughput(const ThroughputSettings& s,
                                             const std::vector<std::size_t>& keys) {
  const std::shared_ptr<Communicator> comm = init();
  ps::TableSpec spec;
  spec.sizes = keys;
  spec.mode = ps::Mode::parse(s.mode);
  spec.replicate = s.replicate;
  const std::unique_ptr<ps::Worker> worker = ps::Worker::fromEnvironment(spec);

  // Small gradients, so the parameters stay finite however long it runs.
  std::vector<std::vector<float>> grads, params;
  for (std::size_t size : keys) {
    grads.emplace_back(size, 1e-4f);
    params.emplace_back(size, 0.0f);
  }
  if (worker->workerId() == 0)
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const std::vector<float> values(keys[k], 0.01f);
      worker->init(static_cast<int>(k), values.data())->wait();
    }
  std::vector<std::shared_ptr<Work>> pending;
  auto step = [&] {
    pending.clear();
    for (std::size_t k = 0; k < keys.size(); ++k) {
      pending.push_back(worker->push(static_cast<int>(k), grads[k].data(), 0.01f));
      pending.push_back(worker->pull(static_cast<int>(k), params[k].data()));
    }
    for (const auto& work : pending) work->wait();
    worker->clock();
  };
  for (int i = 0; i < s.warmup; ++i) step();

  comm->barrier();
  const ps::WorkerStats before = worker->stats();
  const Clock::time_point start = Clock::now();
  std::int64_t timed = 0;
  if (s.steps > 0) {
    for (; timed < s.steps; ++timed) step();
  } else {
    StopVotes votes(*comm);
    const auto length = std::chrono::duration<double>(s.seconds);
    do {
      step();
      ++timed;
    } while (!votes.after(Clock::now() - start >= length));
    votes.drain();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const ps::WorkerStats after = worker->stats();

  // Sums over the workers, then the longest timed span and the slowest worker's own rate.
  double sums[4] = {static_cast<double>(timed), static_cast<double>(after.bytesPushed - before.bytesPushed),
                    static_cast<double>(after.bytesPulled - before.bytesPulled),
                    after.clockWaitSeconds - before.clockWaitSeconds};
  AllreduceOptions sum;
  sum.dtype = DataType::kFloat64;
  comm->allreduce(sums, sums, 4, sum);
  std::vector<double> staleness(after.staleness.size(), 0);
  for (std::size_t k = 0; k < staleness.size() && k < before.staleness.size(); ++k)
    staleness[k] = static_cast<double>(after.staleness[k] - before.staleness[k]);
  comm->allreduce(staleness.data(), staleness.data(), staleness.size(), sum);
  double longest = seconds;
  AllreduceOptions max = sum;
  max.op = ReduceOp::kMax;
  comm->allreduce(&longest, &longest, 1, max);
  double slowest = seconds > 0 ? static_cast<double>(timed) / seconds : 0;
  AllreduceOptions min = sum;
  min.op = ReduceOp::kMin;
  comm->allreduce(&slowest, &slowest, 1, min);

  LaunchedThroughput r;
  r.rank = comm->rank();
  r.minWorkerStepsPerS = slowest;
  r.point.servers = worker->numServers();
  r.point.workers = worker->numWorkers();
  r.point.steps = static_cast<std::uint64_t>(sums[0]);
  r.point.bytesPushed = static_cast<std::uint64_t>(sums[1]);
  r.point.bytesPulled = static_cast<std::uint64_t>(sums[2]);
  r.point.clockWaitS = sums[3];
  r.point.seconds = longest;
  for (double count : staleness) r.point.staleness.push_back(static_cast<std::uint64_t>(count));
  return r;
}

int runLaunchedThroughputPart(const PsBenchFlags& f, const PsMachine& m) {
  const ThroughputSettings& s = f.throughput;
  const std::vector<std::size_t> keys = throughputKeySizes(s.floats);
  LaunchedThroughput r;
  try {
    r = measureLaunchedThroughput(s, keys);
  } catch (const InvalidArgument&) {
    throw;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gyre bench ps: the throughput measurement with the job's servers failed: {}\n",
               e.what());
    return 1;
  }
  if (r.rank != 0) return 0;
  if (f.json) {
    fmt::print("{}\n", launchedThroughputJson(s, keys, r.point, r.minWorkerStepsPerS, m).dump());
  } else {
    fmt::print("== parameter-server throughput with the job's servers\n{}\n{}{}",
               launchedThroughputSettingsText(s, keys, r.point), throughputHeader(s),
               throughputRow(r.point, std::nullopt));
    fmt::print(
        "slowest worker: {:.2f} steps/s of its own. MB/s: pushed + pulled bytes of all workers; stale: the "
        "workers' staleness per update (mean/p50/p99/max).\n",
        r.minWorkerStepsPerS);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace gyre::app
