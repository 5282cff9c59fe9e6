#include "bench_rt_measure.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gyre/errors.h"
#include "gyre/rl/env.h"
#include "gyre/store.h"

namespace gyre::app {
namespace {

std::int64_t rtBenchNoop(std::int64_t x) {
  return x;
}
GYRE_RT_FUNCTION(rtBenchNoop);

class RtBenchActor {
 public:
  std::int64_t ping(std::int64_t x) { return x + ++calls_; }

 private:
  std::int64_t calls_ = 0;
};
GYRE_RT_ACTOR(RtBenchActor);
GYRE_RT_METHOD(RtBenchActor, ping);

// A rollout actor: its own CartPole, stepped with uniformly random actions (no policy network),
// `steps` steps per call; returns the steps taken, for env-steps/s.
class RtBenchRollout {
 public:
  explicit RtBenchRollout(std::int64_t seed)
      : env_(rl::makeEnv("cartpole")), engine_(static_cast<std::uint64_t>(seed)) {
    env_->reset(engine_());
  }
  std::int64_t run(std::int64_t steps) {
    std::bernoulli_distribution coin(0.5);
    for (std::int64_t i = 0; i < steps; ++i) {
      const rl::Step s = env_->step(coin(engine_) ? 1 : 0);
      if (s.terminated || s.truncated) env_->reset(engine_());
    }
    return steps;
  }

 private:
  std::unique_ptr<rl::Env> env_;
  std::mt19937_64 engine_;
};
GYRE_RT_ACTOR(RtBenchRollout, std::int64_t);
GYRE_RT_METHOD(RtBenchRollout, run);

// The bytes this process's network namespace has received on its interfaces but loopback
// (/proc/net/dev): what a get() fetched from another host.
double receivedBytes() {
  std::ifstream in("/proc/net/dev");
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name == "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    double rx = 0;
    if (fields >> rx) total += rx;
  }
  return total;
}

// The network namespace this process runs in ("net:[4026531840]"): a host, to tests/netns.
std::string networkNamespace() {
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<std::size_t>(n)) : "";
}

// --across-hosts: a reader of another process's object that keeps what it read (so that the
// readers after it on its host map the same copy).
class RtBenchReader {
 public:
  // [seconds the get took, bytes this host received meanwhile, bytes read]
  std::vector<double> read(rt::ObjectRef<rt::Buffer> ref) {
    const double before = receivedBytes();
    const auto start = Clock::now();
    held_ = rt::get(ref);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return {seconds, receivedBytes() - before, static_cast<double>(held_.size())};
  }
  std::string where() { return networkNamespace(); }
  bool release() {
    held_ = {};
    return true;
  }

 private:
  rt::Buffer held_;
};
GYRE_RT_ACTOR(RtBenchReader);
GYRE_RT_METHOD(RtBenchReader, read);
GYRE_RT_METHOD(RtBenchReader, where);
GYRE_RT_METHOD(RtBenchReader, release);

// Calls `once` (which makes `batch` calls and waits for them) until `seconds` passed; calls/s.
template <class F>
double rate(double seconds, int batch, F&& once, int warmups = 3) {
  for (int i = 0; i < warmups; ++i) once();  // connections made, threads warm
  std::int64_t calls = 0;
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    once();
    calls += batch;
  }
  return static_cast<double>(calls) / std::chrono::duration<double>(Clock::now() - start).count();
}

// Makes `n` calls, call(0) .. call(n - 1), then waits for every answer.
template <class Call>
void callAll(int n, Call&& call) {
  std::vector<decltype(call(0))> all;
  all.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) all.push_back(call(i));
  for (auto& x : all) x.get();
}

// A runtime of `size` processes (Runtimes of this process on loopback).
std::vector<std::unique_ptr<rt::Runtime>> runtimeOf(int size, int threads) {
  auto store = createMemoryStore();
  std::vector<std::unique_ptr<rt::Runtime>> out;
  for (int r = 0; r < size; ++r) {
    rt::RuntimeOptions o;
    o.threads = threads;
    o.rank = r;
    o.size = size;
    o.store = store;
    o.secret = "gyre-bench-rt";
    out.push_back(std::make_unique<rt::Runtime>(o));
  }
  return out;
}

}  // namespace

std::vector<RtRow> measureOnLoopback(const RtBenchSettings& s) {
  constexpr int kBatch = kRtCallBatch;
  std::vector<RtRow> rows;
  auto tasks = [&](rt::Runtime& driver, int rank, const std::string& where) {
    const rt::CallOptions on{.rank = rank};
    rows.push_back({"single client tasks sync", where,
                    rate(s.seconds, 1, [&] { driver.task(rtBenchNoop).options(on).remote(1).get(); })});
    rows.push_back({"single client tasks async", where, rate(s.seconds, kBatch, [&] {
                      callAll(kBatch, [&](int i) { return driver.task(rtBenchNoop).options(on).remote(i); });
                    })});
  };
  auto actors = [&](rt::Runtime& driver, int rank, const std::string& where) {
    rt::ActorOptions on;
    on.rank = rank;
    const rt::ActorHandle<RtBenchActor> a = driver.actorWith<RtBenchActor>(on);
    rows.push_back(
        {"1:1 actor calls sync", where, rate(s.seconds, 1, [&] { a.call(&RtBenchActor::ping, 1).get(); })});
    rows.push_back({"1:1 actor calls async", where, rate(s.seconds, kBatch, [&] {
                      callAll(kBatch, [&](int i) { return a.call(&RtBenchActor::ping, i); });
                    })});
  };
  {
    auto one = runtimeOf(1, s.threads);
    tasks(*one[0], 0, "in process");
    actors(*one[0], 0, "in process");
  }
  {
    auto two = runtimeOf(2, s.threads);
    tasks(*two[0], 1, "over loopback TCP");
    actors(*two[0], 1, "over loopback TCP");
    // n:n: each process calls an actor in the other, all at once (n = 2).
    rt::ActorOptions on0, on1;
    on0.rank = 0;
    on1.rank = 1;
    const auto a = two[0]->actorWith<RtBenchActor>(on1);
    const auto b = two[1]->actorWith<RtBenchActor>(on0);
    double perSecond = 0;
    std::vector<std::thread> callers;
    std::vector<double> each(2);
    for (int c = 0; c < 2; ++c)
      callers.emplace_back([&, c] {
        const auto& h = c == 0 ? a : b;
        each[static_cast<std::size_t>(c)] = rate(s.seconds, kBatch, [&] {
          callAll(kBatch, [&](int i) { return h.call(&RtBenchActor::ping, i); });
        });
      });
    for (auto& t : callers) t.join();
    for (double e : each) perSecond += e;
    rows.push_back({"n:n actor calls async (n=2)", "over loopback TCP", perSecond});
  }
  // put and get of a 100 MB value in GB/s, beside memcpy of the same bytes in the same run: as a
  // value (MessagePack bin, no per-element encoding; copied at every put and get), and as bytes in
  // shared memory (putBuffer: one copy into a warm file of /dev/shm; get: a view in the owner, a
  // read-only mapping, populated, in another process of the host).
  {
    constexpr std::size_t kBytes = kRtObjectBytes;
    const std::vector<char> value(kBytes, 'x');
    std::vector<char> copy(kBytes);
    const double gb = static_cast<double>(kBytes) / 1e9;
    auto two = runtimeOf(2, s.threads);
    rows.push_back({"memcpy 100 MB", "in process",
                    gb * rate(s.seconds, 1, [&] { std::memcpy(copy.data(), value.data(), kBytes); })});
    rows.push_back({"put 100 MB", "in process",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[0]->put(value); }, 1)});
    const auto ref = two[0]->put(value);
    rows.push_back({"get 100 MB", "in process",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[0]->get(ref); }, 1)});
    rows.push_back({"get 100 MB", "over loopback TCP",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[1]->get(ref); }, 1)});
    rows.push_back({"put 100 MB (shared memory)", "in process",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[0]->putBuffer(value.data(), kBytes); }, 1)});
    const auto shared = two[0]->putBuffer(value.data(), kBytes);
    rows.push_back({"get 100 MB (shared memory)", "in process",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[0]->get(shared); }, 1)});
    rows.push_back({"get 100 MB (shared memory)", "another process, mapped",
                    gb * rate(
                             s.seconds, 1, [&] { (void)two[1]->get(shared); }, 1)});
  }
  // Env steps/s of N rollout actors spread over a runtime of two processes (each with as many
  // threads as actors), every one stepping its CartPole kRtRolloutSteps steps per call, all at once.
  for (int count : kRtRolloutActors) {
    auto two = runtimeOf(2, count);
    std::vector<rt::ActorHandle<RtBenchRollout>> rollouts;
    for (int a = 0; a < count; ++a) {
      rt::ActorOptions on;
      on.rank = a % 2;
      rollouts.push_back(two[0]->actorWith<RtBenchRollout>(on, std::int64_t{a + 1}));
    }
    const double callsPerSecond = rate(s.seconds, count, [&] {
      callAll(count, [&](int a) {
        return rollouts[static_cast<std::size_t>(a)].call(&RtBenchRollout::run, kRtRolloutSteps);
      });
    });
    rows.push_back({rolloutRowName(count), "2 processes",
                    callsPerSecond * static_cast<double>(kRtRolloutSteps), 0, count});
  }
  return rows;
}

std::vector<RtRow> measureAcrossHosts(rt::Runtime& rt) {
  constexpr std::size_t kBytes = kRtObjectBytes;
  const double gb = static_cast<double>(kBytes) / 1e9;
  const std::vector<char> value(kBytes, 'x');
  std::vector<RtRow> rows;
  const auto start = Clock::now();
  const rt::ObjectRef<rt::Buffer> ref = rt.putBuffer(value.data(), kBytes);
  rows.push_back({"put 100 MB (shared memory)", "rank 0",
                  gb / std::chrono::duration<double>(Clock::now() - start).count()});
  std::vector<std::string> hostsSeen{networkNamespace()};
  std::vector<rt::ActorHandle<RtBenchReader>> readers;
  for (int r = 1; r < rt.size(); ++r) {
    rt::ActorOptions on;
    on.rank = r;
    readers.push_back(rt.actorWith<RtBenchReader>(on));
    const std::string host = readers.back().call(&RtBenchReader::where).get();
    const bool seen = std::find(hostsSeen.begin(), hostsSeen.end(), host) != hostsSeen.end();
    const std::vector<double> got = readers.back().call(&RtBenchReader::read, ref).get();
    if (got.size() != 3 || got[2] != static_cast<double>(kBytes))
      throw Error("rank " + std::to_string(r) + " read another size than the object's");
    RtRow row{"get 100 MB (shared memory)", readerWhere(r, host == hostsSeen.front(), seen), gb / got[0]};
    row.receivedMb = got[1] / 1e6;
    rows.push_back(row);
    if (!seen) hostsSeen.push_back(host);
  }
  for (const auto& reader : readers) reader.call(&RtBenchReader::release).get();
  return rows;
}

}  // namespace gyre::app
