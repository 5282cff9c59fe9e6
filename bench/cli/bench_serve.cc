#include "bench_serve.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <regex>
#include <algorithm>
#include <atomic>
#include <thread>

#include "bench_child.h"
#include "bench_lists.h"
#include "bench_serve_plan.h"
#include "bench_serve_step.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct ServeBenchFlags {
  ServeBenchSettings settings;
  std::string rates = "100,200,400,800,1600,3200,6400";
  RunRootFlags runs;
  // --autoscale-step LOW,HIGH: one autoscaling server under a step of load instead.
  std::string step;
  std::string stepSeconds = "5,15,35";
  int maxReplicas = 2;
  double upscaleDelayS = 1;
  double downscaleDelayS = 10;
  // --kill-replica RATE: one server of --replicas replica processes, one SIGKILLed under load.
  double killRate = 0;
  bool replicaProcesses = false;  // --autoscale-step's server: replicas in processes of their own
};

constexpr double kStepP99BoundMs = 100;  // the autoscaling target's bound

// A cnn that gyre train saved after one step (the figures do not depend on its weights).
std::string makeModel(const fs::path& root) {
  const fs::path dir = root / "model";
  const ChildRun run = runTrainingJob("gyre bench serve: the model",
                                      {"train", "--model", "cnn", "--np", "1", "--epochs", "1", "--max-steps", "1",
                                       "--no-eval", "--progress", "off", "--run-dir", dir.string()},
                                      dir, "train.log", 600);
  if (!run.ok) throw RunFailed("gyre bench serve: cannot make the model: " + run.error, 1);
  return dir.string();
}

// One request's body: a row of 784 pixels in [0, 1).
LoadSpec loadFor(const ServeBenchSettings& s, int port) {
  std::mt19937 random(1);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<float> row(784);
  for (float& v : row) v = pixel(random);
  LoadSpec l;
  l.port = port;
  l.path = "/v1/models/bench:predict";  // the name ServerRun gives any model
  l.seconds = s.seconds;
  if (s.format == "raw") {
    l.body.assign(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
    l.contentType = "application/octet-stream";
    l.shapeHeader = "1,784";
  } else {
    l.body = nlohmann::json{{"instances", {row}}}.dump();
  }
  return l;
}

// A short load before the measured ones: the first forward passes are slow.
void warmUp(const ServeBenchSettings& s, int port) {
  LoadSpec warm = loadFor(s, port);
  warm.clients = 4;
  warm.seconds = 0.5;
  runLoad(warm);
}

// A gyre serve of `model` with `config`'s flags, its output in `log`; up until destroyed.
class ServerRun {
 public:
  ServerRun(const std::string& model, const ServeConfig& config, const fs::path& log) : log_(log) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error("cannot write " + log.string());
    launcher::ChildSpec spec;
    spec.name = "gyre serve (" + config.name + ")";
    spec.path = launcher::selfExecutable();
    spec.argv = {"gyre", "serve", model, "--port", "0", "--name", "bench"};
    spec.argv.insert(spec.argv.end(), config.flags.begin(), config.flags.end());
    spec.stdoutFd = spec.stderrFd = fd;
    group_.spawn(spec);
    ::close(fd);
    // Its first line names the port it got.
    const std::regex address(R"(on http://[^:]+:(\d+) )");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = readFile();
      if (std::regex_search(text, m, address)) port_ = std::stoi(m[1]);
      else if (!group_.reap().empty())
        throw RunFailed(spec.name + " exited before it served: " + logTail(log_), 1);
      else std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (port_ == 0) throw RunFailed(spec.name + " did not start serving within 60 s: " + logTail(log_), 1);
  }
  ~ServerRun() { group_.stopAll(std::chrono::milliseconds(5000)); }
  int port() const { return port_; }

 private:
  std::string readFile() const {
    std::string text;
    for (const std::string& line : readLines(log_)) text += line + "\n";
    return text;
  }
  fs::path log_;
  launcher::ProcessGroup group_;
  int port_ = 0;
};

// The step: LOW, HIGH, LOW requests/s for --step-seconds each, open loop, on one server
// autoscaling between 1 and --max-replicas, its replica count read from /metrics every 200 ms.
int runStepBench(const ServeBenchFlags& f, const std::string& model, const RunRoot& runRoot) {
  const ServeBenchSettings& s = f.settings;
  const std::vector<std::string> rates = splitCommas(f.step);
  const std::vector<std::string> lengths = splitCommas(f.stepSeconds);
  GYRE_USAGE_CHECK(rates.size() == 2, "--autoscale-step takes LOW,HIGH requests/s (got '", f.step, "')");
  GYRE_USAGE_CHECK(lengths.size() == 3, "--step-seconds takes three lengths, LOW,HIGH,LOW (got '", f.stepSeconds, "')");
  GYRE_USAGE_CHECK(f.maxReplicas >= 2 && f.maxReplicas <= 64, "--max-replicas must be between 2 and 64");
  ServeConfig config{
      "autoscaled",
      {"--max-batch-size", std::to_string(s.maxBatchSize), "--batch-wait-ms", fmt::format("{}", s.batchWaitMs),
       "--max-connections", std::to_string(2 * s.senders + 8),  // the /metrics reader gets in under any load
       "--min-replicas", "1", "--max-replicas", std::to_string(f.maxReplicas), "--upscale-delay",
       fmt::format("{}", f.upscaleDelayS), "--downscale-delay", fmt::format("{}", f.downscaleDelayS)}};
  if (f.replicaProcesses) config.flags.emplace_back("--replica-processes");
  const ServerRun server(model, config, runRoot.path() / "autoscaled.log");
  warmUp(s, server.port());

  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  const auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::vector<ReplicaSample> samples;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    httplib::Client client("127.0.0.1", server.port());
    const std::regex replicas(R"(\ngyre_serve_replicas (\d+))");
    while (!done) {
      const double at = since();
      if (const httplib::Result r = client.Get("/metrics"); r && r->status == 200) {
        std::smatch m;
        if (std::regex_search(r->body, m, replicas)) samples.push_back({at, std::stoi(m[1])});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::vector<StepPhase> phases;
  try {
    for (std::size_t i = 0; i < 3; ++i) {
      StepPhase p;
      p.rate = std::stod(rates[i == 1 ? 1 : 0]);
      p.seconds = std::stod(lengths[i]);
      LoadSpec load = loadFor(s, server.port());
      load.rate = p.rate;
      load.clients = s.senders;
      load.seconds = p.seconds;
      p.startS = since() + 0.02;  // runLoad's first request is due 20 ms after its call
      LoadResult r = runLoad(load);
      for (double& d : r.dueS) d += p.startS;
      p.seconds = std::max(p.seconds, r.seconds);  // a server that fell behind stretches the phase
      p.dueS = std::move(r.dueS);
      p.latenciesMs = std::move(r.latenciesMs);
      p.errors = r.errors;
      phases.push_back(std::move(p));
      if (launcher::interruptSignal() != 0) break;
    }
  } catch (...) {
    done = true;
    scraper.join();
    throw;
  }
  done = true;
  scraper.join();
  if (launcher::interruptSignal() != 0) throw RunFailed("gyre bench serve: interrupted", 130);
  const std::vector<StepWindow> windows = stepWindows(phases, samples);
  const StepVerdict v = stepVerdict(phases, samples, 1, f.maxReplicas, kStepP99BoundMs);
  if (s.json) {
    fmt::print("{}\n", stepJson(windows, v, kStepP99BoundMs).dump());
  } else {
    fmt::print("gyre bench serve: autoscaling 1-{} replicas, {} then {} then {} requests/s for {} s (--max-batch-size "
               "{}, --upscale-delay {}, --downscale-delay {})\n{}",
               f.maxReplicas, rates[0], rates[1], rates[0], f.stepSeconds, s.maxBatchSize, f.upscaleDelayS,
               f.downscaleDelayS, stepText(windows, v, kStepP99BoundMs));
  }
  return 0;
}

// The process of the running `gyre serve --replica-processes` that is rank `rank` of its job
// (one server runs at a time here); -1 when there is none.
int replicaProcess(int rank) {
  const std::string want = "GYRE_RANK=" + std::to_string(rank);
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline, environ;
    for (const std::string& line : readLines(e.path() / "cmdline")) cmdline += line;
    if (cmdline.find("gyre_serve_worker") == std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    for (std::string var; std::getline(in, var, '\0');)
      if (var == want) return std::stoi(pid);
  }
  return -1;
}

// --kill-replica RATE: RATE requests/s for --seconds, open loop, on a server of --replicas replica
// processes; a third of the way in, the process of the first replica is SIGKILLed. The row counts
// the errors (the target: none) and how long after its loss the lost replica's batch was answered
// by its replacement (from the server's log; the target: within 5 s).
int runKillBench(const ServeBenchFlags& f, const std::string& model, const RunRoot& runRoot) {
  const ServeBenchSettings& s = f.settings;
  const ServeConfig config{
      "replica-killed",
      {"--max-batch-size", std::to_string(s.maxBatchSize), "--batch-wait-ms", fmt::format("{}", s.batchWaitMs),
       "--replicas", std::to_string(s.replicas), "--replica-processes", "--max-connections",
       std::to_string(2 * s.senders + 8)}};
  const fs::path log = runRoot.path() / "replica-killed.log";
  const ServerRun server(model, config, log);
  warmUp(s, server.port());
  const int victim = replicaProcess(1);
  if (victim < 0) throw RunFailed("gyre bench serve: no replica process of rank 1 to kill", 1);
  LoadSpec load = loadFor(s, server.port());
  load.rate = f.killRate;
  load.clients = s.senders;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds / 3));
    ::kill(victim, SIGKILL);
  });
  const LoadResult result = runLoad(load);
  killer.join();
  double replacedMs = -1;
  const std::regex answered(R"(was lost .* answered there (\d+) ms later)");
  for (int i = 0; i < 50 && replacedMs < 0; ++i) {  // the line may come a moment after the load
    for (const std::string& line : readLines(log)) {
      std::smatch m;
      if (std::regex_search(line, m, answered)) replacedMs = std::stod(m[1]);
    }
    if (replacedMs < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const ServeRow row = serveRow(config.name, load, result);
  const bool pass = row.errors == 0 && replacedMs >= 0 && replacedMs <= 5000;
  if (s.json) {
    nlohmann::json j = serveRowJson(row);
    j["replaced_ms"] = replacedMs;
    j["target"] = pass ? "pass" : "miss";
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("gyre bench serve: {} requests/s for {} s on {} replica process(es); process {} (rank 1) SIGKILLed "
               "after {:.1f} s\n{}{}targets: 0 failed requests, the replica replaced within 5 s: {} failed, replaced "
               "after {}  {}\n",
               f.killRate, s.seconds, s.replicas, victim, s.seconds / 3, serveHeader(s), serveRowText(row), row.errors,
               replacedMs < 0 ? std::string("never") : fmt::format("{:.0f} ms", replacedMs), pass ? "PASS" : "MISS");
  }
  return 0;  // a figure, PASS or MISS, as the step's
}

int runServeBench(ServeBenchFlags f) {
  ServeBenchSettings& s = f.settings;
  s.rates.clear();
  for (const std::string& r : splitCommas(f.rates)) s.rates.push_back(std::stod(r));
  ServeBenchSettings checked = s;  // the step's one server may run unbatched (--max-batch-size 1)
  if (!f.step.empty()) checked.maxBatchSize = std::max(checked.maxBatchSize, 2);
  validate(checked);
  requireNoLauncher("gyre bench serve");
  const RunRoot runRoot(f.runs, "gyre bench serve");
  launcher::installInterruptHandlers();
  std::vector<ServeRow> rows;
  std::vector<ServeCompute> computes;
  try {
    const std::string model = s.model.empty() ? makeModel(runRoot.path()) : s.model;
    if (f.killRate > 0) {
      const int code = runKillBench(f, model, runRoot);
      runRoot.done(/*failed=*/false);
      return code;
    }
    if (!f.step.empty()) {
      const int code = runStepBench(f, model, runRoot);
      runRoot.done(/*failed=*/false);
      return code;
    }
    if (!s.json) fmt::print("{}", serveHeader(s));
    std::fflush(stdout);
    for (const ServeConfig& config : planServeConfigs(s)) {
      const ServerRun server(model, config, runRoot.path() / (config.name + ".log"));
      warmUp(s, server.port());
      LoadSpec load = loadFor(s, server.port());
      auto measure = [&](double rate, int clients) {
        load.rate = rate;
        load.clients = rate > 0 ? s.senders : clients;
        rows.push_back(serveRow(config.name, load, runLoad(load)));
        fmt::print("{}", s.json ? serveRowJson(rows.back()).dump() + "\n" : serveRowText(rows.back()));
        std::fflush(stdout);
        if (launcher::interruptSignal() != 0) throw RunFailed("gyre bench serve: interrupted", 130);
      };
      if (s.clients > 0) {
        measure(0, s.clients);
      } else {
        for (const double rate : s.rates) {
          measure(rate, 0);
          if (!keptUp(rows.back(), s.p99BoundMs)) break;  // past what it sustains
        }
      }
      httplib::Client client("127.0.0.1", server.port());
      if (const httplib::Result r = client.Get("/metrics"); r && r->status == 200)
        computes.push_back(serveCompute(config.name, r->body));
    }
  } catch (const RunFailed& e) {
    fmt::print(stderr, "{}\n", e.what());
    runRoot.done(/*failed=*/true);
    return e.code();
  }
  fmt::print("{}", s.json ? serveComputeJson(computes).dump() + "\n" : serveComputeText(computes));
  fmt::print("{}", s.json ? serveSummaryJson(rows, s).dump() + "\n" : serveSummaryText(rows, s));
  runRoot.done(/*failed=*/false);
  return 0;
}

}  // namespace

void addBenchServe(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<ServeBenchFlags>();
  ServeBenchSettings& s = f->settings;
  CLI::App* cmd = bench.add_subcommand(
      "serve", "Model serving: requests/s and latency of one request per forward pass against dynamic batching");
  cmd->footer(
      "Starts `gyre serve` on a cnn (--model, or one gyre train makes for the run) twice, one after the other:\n"
      "the baseline (--max-batch-size 1: one request per forward pass) and batched (--max-batch-size,\n"
      "--batch-wait-ms, --replicas). Each gets requests of one 28x28 image (JSON instances, or raw float32\n"
      "with --format raw) from this process, open loop at each of --rates (Poisson arrivals; latency\n"
      "counts from when a request was due) until it falls behind (an error, p99 over --p99-bound-ms or\n"
      "under 90% of the rate answered), or closed loop with --clients. Prints requests/s, p50/p90/p99\n"
      "latency and errors per load, then the most requests/s each sustains within the bound and their\n"
      "ratio (target: batched >= 4x). With --autoscale-step LOW,HIGH: one server autoscaling between 1 and\n"
      "--max-replicas under LOW, HIGH, LOW requests/s, per second (targets: the most replicas and p99 <= 100 ms\n"
      "within 10 s of the step up, back to 1 within 30 s of the step down). With --kill-replica RATE: one\n"
      "server of --replicas replica processes under RATE requests/s, one process SIGKILLed (targets: no\n"
      "failed request, the replica replaced within 5 s). See docs/serving.md.\n\n"
      "Examples:\n"
      "  gyre bench serve\n"
      "  gyre bench serve --rates 200,800 --seconds 1 --json   # a quick run\n"
      "  gyre bench serve --clients 16 --format raw\n"
      "  gyre bench serve --autoscale-step 100,1200\n"
      "  gyre bench serve --kill-replica 400 --replicas 2 --seconds 6");
  cmd->add_option("--model", s.model, "A run directory of gyre train (default: a cnn made for the run)");
  cmd->add_option("--format", s.format, "json (v1 instances) or raw (float32)")->capture_default_str();
  cmd->add_option("--rates", f->rates, "Open-loop request rates per second, comma-separated, in order")
      ->capture_default_str();
  cmd->add_option("--clients", s.clients, "Closed loop with this many clients instead of --rates (0: open loop)")
      ->capture_default_str();
  cmd->add_option("--seconds", s.seconds, "Seconds of each load")->capture_default_str();
  cmd->add_option("--max-batch-size", s.maxBatchSize, "The batched server's --max-batch-size")->capture_default_str();
  cmd->add_option("--batch-wait-ms", s.batchWaitMs, "The batched server's --batch-wait-ms")->capture_default_str();
  cmd->add_option("--replicas", s.replicas, "The batched server's --replicas")->capture_default_str();
  cmd->add_option("--baseline-replicas", s.baselineReplicas,
                  "The baseline's --replicas (each answers one request per forward pass)")
      ->capture_default_str();
  cmd->add_option("--p99-bound-ms", s.p99BoundMs, "The p99 latency a sustained rate stays within")
      ->capture_default_str();
  cmd->add_option("--senders", s.senders, "Open loop: connections sending at once")->capture_default_str();
  cmd->add_option("--autoscale-step", f->step,
                  "LOW,HIGH: one server autoscaling between 1 and --max-replicas under LOW, HIGH, LOW requests/s");
  cmd->add_option("--step-seconds", f->stepSeconds, "--autoscale-step: the three phases' lengths")
      ->capture_default_str();
  cmd->add_option("--max-replicas", f->maxReplicas, "--autoscale-step: the server's --max-replicas")
      ->capture_default_str();
  cmd->add_option("--upscale-delay", f->upscaleDelayS, "--autoscale-step: the server's --upscale-delay")
      ->capture_default_str();
  cmd->add_option("--downscale-delay", f->downscaleDelayS, "--autoscale-step: the server's --downscale-delay")
      ->capture_default_str();
  cmd->add_flag("--replica-processes", f->replicaProcesses,
               "--autoscale-step: the server's replicas in processes of their own (gyre serve --replica-processes)");
  cmd->add_option("--kill-replica", f->killRate,
                  "RATE: one server of --replicas replica processes under RATE requests/s for --seconds, the first "
                  "replica's process SIGKILLed a third of the way in");
  cmd->add_flag("--json", s.json, "One JSON object per load and a summary object, instead of the table");
  addRunRootOptions(*cmd, f->runs);
  cmd->callback([f, &action] { action = [f] { return runServeBench(*f); }; });
}

}  // namespace gyre::app
