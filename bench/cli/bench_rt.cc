#include "bench_rt.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

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

using Clock = std::chrono::steady_clock;

struct RtBenchFlags {
  double seconds = 2;  // per row
  int threads = 2;     // per process of the runtime
  bool json = false;
};

struct Row {
  std::string name;     // Ray's name for it
  std::string where;    // "in process" or "over loopback TCP"
  double perSecond = 0;
  double target = 0;    // 0: none
};

// Calls `once` (which makes `batch` calls and waits for them) until `seconds` passed; calls/s.
template <class F>
double rate(double seconds, int batch, F&& once) {
  for (int i = 0; i < 3; ++i) once();  // connections made, threads warm
  std::int64_t calls = 0;
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    once();
    calls += batch;
  }
  return static_cast<double>(calls) / std::chrono::duration<double>(Clock::now() - start).count();
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
                      std::vector<rt::Future<std::int64_t>> all;
                      all.reserve(kBatch);
                      for (int i = 0; i < kBatch; ++i) all.push_back(driver.task(rtBenchNoop).options(on).remote(i));
                      for (auto& x : all) x.get();
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
                      std::vector<rt::Future<std::int64_t>> all;
                      all.reserve(kBatch);
                      for (int i = 0; i < kBatch; ++i) all.push_back(a.call(&RtBenchActor::ping, i));
                      for (auto& x : all) x.get();
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
        each[static_cast<std::size_t>(c)] = rate(f.seconds, kBatch, [&] {
          std::vector<rt::Future<std::int64_t>> all;
          all.reserve(kBatch);
          for (int i = 0; i < kBatch; ++i) all.push_back(h.call(&RtBenchActor::ping, i));
          for (auto& x : all) x.get();
        });
      });
    for (auto& t : callers) t.join();
    for (double e : each) perSecond += e;
    rows.push_back({"n:n actor calls async (n=2)", "over loopback TCP", perSecond, 0});
  }
  return rows;
}

int run(const RtBenchFlags& f) {
  std::vector<Row> rows;
  try {
    rows = measure(f);
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
                                        {"threads", f.threads},
                                        {"hardware_threads", std::thread::hardware_concurrency()}}
                                .dump());
    return 0;
  }
  fmt::print("gyre bench rt: {} s per row, {} threads per process, {} hardware threads\n", f.seconds, f.threads,
             std::thread::hardware_concurrency());
  fmt::print("{:<30} {:<18} {:>12}  {}\n", "benchmark", "where", "calls/s", "target");
  for (const Row& r : rows)
    fmt::print("{:<30} {:<18} {:>12.0f}  {}\n", r.name, r.where, r.perSecond,
               r.target > 0 ? fmt::format("{} {:.0f}", r.perSecond >= r.target ? "PASS" : "MISS", r.target) : "");
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
      "(20k sync tasks/s, 100k async tasks/s, 20k sync actor calls/s) say PASS or MISS.\n"
      "See docs/benchmarks.md, \"gyre bench rt\".");
  cmd->add_option("--seconds", f->seconds, "Seconds each row measures")->check(CLI::Range(0.1, 600.0))->capture_default_str();
  cmd->add_option("--threads", f->threads, "Worker threads per process of the runtime")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "One JSON object per row instead of the table");
  cmd->callback([f, &action] { action = [f] { return run(*f); }; });
}

}  // namespace gyre::app
