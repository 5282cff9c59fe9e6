#include "bench_rt.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_rt_measure.h"
#include "bench_rt_plan.h"
#include "bench_rt_report.h"
#include "bench_programs.h"
#include "gyre/rt.h"
#include "gyre/store.h"

namespace gyre::app {
namespace {

// --python: bench/rt/python_rt.py in this process's place, with the build's Python package on
// PYTHONPATH (an installed one is on Debian's python3's path already).
int runPythonRows(const RtBenchSettings& f) {
  namespace fs = std::filesystem;
  const fs::path package = fs::path(toolDirectory()).parent_path() / "python";
  if (fs::is_directory(package / "gyre")) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = package.string() + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
    ::setenv("PYTHONPATH", path.c_str(), 1);
  }
  std::vector<std::string> args = {"/usr/bin/python3", besideTool("gyre_rt_python.py"), "--seconds",
                                   fmt::format("{}", f.seconds), "--repeat", std::to_string(f.repeat),
                                   "--workers", std::to_string(f.workers)};
  if (f.json) args.emplace_back("--json");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  fmt::print(stderr, "gyre bench rt --python: cannot run {} {}: {}\n", args[0], args[1], std::strerror(errno));
  return 1;
}

int runRtBench(const RtBenchSettings& f) {
  if (f.python) return runPythonRows(f);
  std::vector<RtRow> rows;
  std::unique_ptr<rt::Runtime> launched;  // --across-hosts
  std::shared_ptr<Store> store;
  try {
    if (f.acrossHosts) {
      const rt::RuntimeOptions o = rt::RuntimeOptions::fromEnvironment();
      checkAcrossHostsJob(o.size);
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
    // Every row once per round; each reports its median round (the machine's speed drifts).
    std::vector<std::vector<RtRow>> rounds;
    for (int round = 1; round <= f.repeat; ++round) {
      rounds.push_back(f.acrossHosts ? measureAcrossHosts(*launched) : measureOnLoopback(f));
      setRtTargets(rounds.back());
    }
    rows = medianOfRounds(rounds);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gyre bench rt: {}\n", e.what());
    return 1;
  }
  const unsigned hardwareThreads = std::thread::hardware_concurrency();
  if (!f.json) {
    fmt::print("{}", rtTable(f, rows, hardwareThreads));
    return 0;
  }
  for (const RtRow& r : rows) fmt::print("{}\n", rtRowJson(r, f, hardwareThreads).dump());
  return 0;
}

}  // namespace

void addBenchRt(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<RtBenchSettings>();
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
  cmd->add_option("--seconds", f->seconds, "Seconds each row measures")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
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
  cmd->add_flag("--python", f->python,
                "The rows from Python instead (gyre.rt, Ray's Python API, between gyre.rt.init's worker "
                "processes): sync and async tasks and actor calls, put and get of a 100 MB numpy array beside "
                "memcpy, and another process's resident memory before and after its get; Ray's published "
                "figures beside");
  cmd->add_option("--workers", f->workers, "With --python: gyre.rt.init's worker processes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->callback([f, &action] { action = [f] { return runRtBench(*f); }; });
}

}  // namespace gyre::app
