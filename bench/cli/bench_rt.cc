#include "bench_rt.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gyre/rl/env.h"
#include "gyre/rt.h"
#include "gyre/store.h"

namespace gyre::app {
namespace {

std::int64_t rtBenchNoop(std::int64_t x) { return x; }
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
  explicit RtBenchRollout(std::int64_t seed) : env_(rl::makeEnv("cartpole")), engine_(static_cast<std::uint64_t>(seed)) {
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

using Clock = std::chrono::steady_clock;

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
  // [seconds the get took, bytes this host received meanwhile]
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

struct RtBenchFlags {
  double seconds = 2;  // per row
  int threads = 2;     // per process of the runtime
  int repeat = 1;      // rounds of every row; a row reports the median
  bool json = false;
  bool acrossHosts = false;  // the ranks of a launched job: an object's gets from the other hosts
};

struct Row {
  std::string name;     // Ray's name for it
  std::string where;    // "in process" or "over loopback TCP"
  double perSecond = 0;
  double target = 0;    // 0: none
  int threads = 0;      // per process; 0: --threads
  double receivedMb = -1;  // --across-hosts: what the reader's host received; -1: not measured
};

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

std::vector<Row> measure(const RtBenchFlags& f) {
  constexpr int kBatch = 1000;
  std::vector<Row> rows;
  auto tasks = [&](rt::Runtime& driver, int rank, const std::string& where) {
    const rt::CallOptions on{.rank = rank};
    rows.push_back({"single client tasks sync", where,
                    rate(f.seconds, 1, [&] { driver.task(rtBenchNoop).options(on).remote(1).get(); }), 20000});
    rows.push_back({"single client tasks async", where, rate(f.seconds, kBatch, [&] {
                      callAll(kBatch, [&](int i) { return driver.task(rtBenchNoop).options(on).remote(i); });
                    }),
                    100000});
  };
  auto actors = [&](rt::Runtime& driver, int rank, const std::string& where) {
    rt::ActorOptions on;
    on.rank = rank;
    const rt::ActorHandle<RtBenchActor> a = driver.actorWith<RtBenchActor>(on);
    rows.push_back({"1:1 actor calls sync", where,
                    rate(f.seconds, 1, [&] { a.call(&RtBenchActor::ping, 1).get(); }), 20000});
    rows.push_back({"1:1 actor calls async", where, rate(f.seconds, kBatch, [&] {
                      callAll(kBatch, [&](int i) { return a.call(&RtBenchActor::ping, i); });
                    }),
                    0});
  };
  {
    auto one = runtimeOf(1, f.threads);
    tasks(*one[0], 0, "in process");
    actors(*one[0], 0, "in process");
  }
  {
    auto two = runtimeOf(2, f.threads);
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
        each[static_cast<std::size_t>(c)] = rate(
            f.seconds, kBatch, [&] { callAll(kBatch, [&](int i) { return h.call(&RtBenchActor::ping, i); }); });
      });
    for (auto& t : callers) t.join();
    for (double e : each) perSecond += e;
    rows.push_back({"n:n actor calls async (n=2)", "over loopback TCP", perSecond, 0});
  }
  // put and get of a 100 MB value in GB/s, beside memcpy of the same bytes in the same run: as a
  // value (MessagePack bin, no per-element encoding; copied at every put and get), and as bytes in
  // shared memory (putBuffer: one copy into a warm file of /dev/shm; get: a view in the owner, a
  // read-only mapping, populated, in another process of the host). Target: half of memcpy.
  {
    constexpr std::size_t kBytes = std::size_t{100} << 20;
    const std::vector<char> value(kBytes, 'x');
    std::vector<char> copy(kBytes);
    const double gb = static_cast<double>(kBytes) / 1e9;
    auto two = runtimeOf(2, f.threads);
    const double memcpyGbPerS = gb * rate(f.seconds, 1, [&] { std::memcpy(copy.data(), value.data(), kBytes); });
    rows.push_back({"memcpy 100 MB", "in process", memcpyGbPerS, 0});
    rows.push_back({"put 100 MB", "in process", gb * rate(f.seconds, 1, [&] { (void)two[0]->put(value); }, 1), 0});
    const auto ref = two[0]->put(value);
    rows.push_back({"get 100 MB", "in process", gb * rate(f.seconds, 1, [&] { (void)two[0]->get(ref); }, 1), 0});
    rows.push_back(
        {"get 100 MB", "over loopback TCP", gb * rate(f.seconds, 1, [&] { (void)two[1]->get(ref); }, 1), 0});
    const double half = memcpyGbPerS / 2;
    rows.push_back({"put 100 MB (shared memory)", "in process",
                    gb * rate(f.seconds, 1, [&] { (void)two[0]->putBuffer(value.data(), kBytes); }, 1), half});
    const auto shared = two[0]->putBuffer(value.data(), kBytes);
    rows.push_back({"get 100 MB (shared memory)", "in process",
                    gb * rate(f.seconds, 1, [&] { (void)two[0]->get(shared); }, 1), half});
    rows.push_back({"get 100 MB (shared memory)", "another process, mapped",
                    gb * rate(f.seconds, 1, [&] { (void)two[1]->get(shared); }, 1), half});
  }
  // Env steps/s of N rollout actors spread over a runtime of two processes (each with as many
  // threads as actors), every one stepping its CartPole 20,000 steps per call, all at once.
  for (int count : {1, 2, 4}) {
    auto two = runtimeOf(2, count);
    std::vector<rt::ActorHandle<RtBenchRollout>> rollouts;
    for (int a = 0; a < count; ++a) {
      rt::ActorOptions on;
      on.rank = a % 2;
      rollouts.push_back(two[0]->actorWith<RtBenchRollout>(on, std::int64_t{a + 1}));
    }
    constexpr std::int64_t kSteps = 20000;
    const double callsPerSecond = rate(f.seconds, count, [&] {
      callAll(count, [&](int a) { return rollouts[static_cast<std::size_t>(a)].call(&RtBenchRollout::run, kSteps); });
    });
    rows.push_back({"cartpole env steps, " + std::to_string(count) + " actor" + (count > 1 ? "s" : ""),
                    "2 processes", callsPerSecond * static_cast<double>(kSteps), 0, count});
  }
  return rows;
}

// --across-hosts, in rank 0 of a launched job: a 100 MB object put here (in shared memory), then
// read by every other rank in turn, each keeping what it read: a rank on another host than the
// ones before it fetches it over the network; the ranks after it on its host map that host's copy
// and receive nothing. Each row: GB/s of the get and the MB its host received meanwhile.
std::vector<Row> measureAcrossHosts(rt::Runtime& rt) {
  constexpr std::size_t kBytes = std::size_t{100} << 20;
  const double gb = static_cast<double>(kBytes) / 1e9;
  const std::vector<char> value(kBytes, 'x');
  std::vector<Row> rows;
  const auto start = Clock::now();
  const rt::ObjectRef<rt::Buffer> ref = rt.putBuffer(value.data(), kBytes);
  rows.push_back({"put 100 MB (shared memory)", "rank 0",
                  gb / std::chrono::duration<double>(Clock::now() - start).count(), 0});
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
    const std::string where = "rank " + std::to_string(r) + ", " +
                              (host == hostsSeen.front() ? "this host"
                               : seen                    ? "another host, its copy"
                                                         : "another host, fetched");
    Row row{"get 100 MB (shared memory)", where, gb / got[0], 0};
    row.receivedMb = got[1] / 1e6;
    rows.push_back(row);
    if (!seen) hostsSeen.push_back(host);
  }
  for (const auto& reader : readers) reader.call(&RtBenchReader::release).get();
  return rows;
}

int run(const RtBenchFlags& f) {
  std::vector<Row> rows;
  std::unique_ptr<rt::Runtime> launched;  // --across-hosts
  std::shared_ptr<Store> store;
  try {
    if (f.acrossHosts) {
      const rt::RuntimeOptions o = rt::runtimeOptionsFromEnvironment();
      if (o.size < 2)
        throw InvalidArgument("--across-hosts runs as the ranks of a job of 2 or more (gyre run -H a:1,b:2 -- gyre bench rt --across-hosts)");
      launched = std::make_unique<rt::Runtime>(o);
      store = o.store;
      if (o.rank != 0) {  // serve rank 0's readers until it is done
        store->get("gyre-bench-rt/done", std::chrono::minutes(10));
        return 0;
      }
    }
    struct Done {  // rank 0's last word, however it ends, so the others stop serving
      std::shared_ptr<Store> store;
      ~Done() {
        if (store) store->setString("gyre-bench-rt/done", "1");
      }
    } done{store};
    auto measureOnce = [&] { return f.acrossHosts ? measureAcrossHosts(*launched) : measure(f); };
    // Every row once per round; each reports its median round (the machine's speed drifts).
    rows = measureOnce();
    std::vector<std::vector<double>> values(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) values[i].push_back(rows[i].perSecond);
    for (int r = 1; r < f.repeat; ++r) {
      const std::vector<Row> more = measureOnce();
      for (std::size_t i = 0; i < rows.size() && i < more.size(); ++i) values[i].push_back(more[i].perSecond);
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::sort(values[i].begin(), values[i].end());
      rows[i].perSecond = values[i][values[i].size() / 2];
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "gyre bench rt: {}\n", e.what());
    return 1;
  }
  if (f.json) {
    for (const Row& r : rows)
      fmt::print("{}\n", nlohmann::json{{"benchmark", r.name},
                                        {"where", r.where},
                                        {"per_s", r.perSecond},
                                        {"target_per_s", r.target > 0 ? nlohmann::json(r.target) : nlohmann::json()},
                                        {"threads", r.threads > 0 ? r.threads : f.threads},
                                        {"received_mb", r.receivedMb >= 0 ? nlohmann::json(r.receivedMb) : nlohmann::json()},
                                        {"repeat", f.repeat},
                                        {"hardware_threads", std::thread::hardware_concurrency()}}
                                .dump());
    return 0;
  }
  fmt::print("gyre bench rt: {} s per row, median of {} round(s), {} threads per process, {} hardware threads\n",
             f.seconds, f.repeat, f.threads, std::thread::hardware_concurrency());
  fmt::print("{:<30} {:<32} {:>14}  {}\n", "benchmark", "where", "per second", "target");
  for (const Row& r : rows) {
    const bool bytes = r.name.find("100 MB") != std::string::npos;  // GB/s; the others count calls or steps
    const std::string target = bytes ? fmt::format("{:.2f} GB", r.target) : fmt::format("{:.0f}", r.target);
    fmt::print("{:<30} {:<32} {:>14}  {}\n", r.name, r.where,
               bytes ? fmt::format("{:.2f} GB", r.perSecond) : fmt::format("{:.0f}", r.perSecond),
               r.target > 0      ? fmt::format("{} {}", r.perSecond >= r.target ? "PASS" : "MISS", target)
               : r.receivedMb >= 0 ? fmt::format("its host received {:.1f} MB", r.receivedMb)
                                   : "");
  }
  return 0;
}

}  // namespace

void addBenchRt(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<RtBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "rt", "Task and actor runtime: tasks/s and actor calls/s, sync and async, in process and over TCP");
  cmd->footer(
      "Runs Ray's microbenchmark set on gyre::rt: single-client sync and async tasks, 1:1 sync and async\n"
      "actor calls, and n:n async actor calls (n = 2). The runtime's processes are Runtimes of this\n"
      "process, each with --threads threads, listening on loopback: a remote call crosses an\n"
      "authenticated TCP connection with its arguments and result serialized. Rows of the targets\n"
      "(20k sync tasks/s, 100k async tasks/s, 20k sync actor calls/s) say PASS or MISS. Then put and get\n"
      "of 100 MB (values, and bytes in shared memory) in GB/s beside memcpy, and CartPole env steps/s of\n"
      "1, 2 and 4 rollout actors (random actions, 20,000 steps a call) over two processes.\n"
      "With --across-hosts it runs as the ranks of a launched job instead: rank 0 puts 100 MB in shared\n"
      "memory and every other rank gets it in turn (a host's first reader fetches it, the others map its\n"
      "copy). See docs/benchmarks.md, \"gyre bench rt\".\n\n"
      "Examples:\n"
      "  gyre bench rt --repeat 3          # the figures in docs/benchmarks.md\n"
      "  gyre bench rt --seconds 0.2 --json\n"
      "  gyre run -H a:1,b:2 -- gyre bench rt --across-hosts");
  cmd->add_option("--seconds", f->seconds, "Seconds each row measures")->check(CLI::Range(0.1, 600.0))->capture_default_str();
  cmd->add_option("--threads", f->threads, "Worker threads per process of the runtime")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--repeat", f->repeat, "Rounds of every row; each row reports its median")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "One JSON object per row instead of the table");
  cmd->add_flag("--across-hosts", f->acrossHosts,
                "Run as every rank of a launched job (gyre run -H a:1,b:2 -- gyre bench rt --across-hosts): "
                "rank 0 puts a 100 MB object, every other rank reads it in turn; prints GB/s and the MB each "
                "reader's host received (tests/netns/rt_hosts.sh runs it over network-namespace hosts)");
  cmd->callback([f, &action] { action = [f] { return run(*f); }; });
}

}  // namespace gyre::app
