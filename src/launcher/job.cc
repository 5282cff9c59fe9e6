#include "launcher/job.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <span>

#include "common/auth.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/numbers.h"
#include "gyre/init.h"
#include "launcher/elastic_job.h"
#include "launcher/failures.h"
#include "launcher/generation.h"
#include "launcher/output.h"
#include "launcher/process.h"
#include "launcher/ps_servers.h"
#include "launcher/rdzv_job.h"
#include "launcher/run_metrics.h"
#include "metrics/server.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;

// Runs generations of the job until one succeeds, one is not restarted (an interrupt, --timeout,
// a failure no restart gets past, no restarts left), and reports how the job went.
class Job {
 public:
  explicit Job(const RunOptions& o) : o_(o) {}

  int run() {
    signal(SIGPIPE, SIG_IGN);
    installInterruptHandlers();
    std::vector<HostSlots> hosts = o_.hosts;
    if (hosts.empty()) hosts.push_back({"localhost", std::max(1, o_.np)});
    GenerationSpec spec;
    spec.options = &o_;
    spec.placement = placeRanks(hosts, o_.np);
    for (const auto& p : spec.placement) spec.worldSize += p.count;
    spec.jobId = "gyre-" + auth::generateSecret().substr(0, 12);
    spec.maxRestarts = o_.maxRestarts;
    spec.jobDeadline = o_.timeoutS > 0 ? Deadline::after(numbers::millis(o_.timeoutS))
                                       : Deadline::never();
    worldSize_ = spec.worldSize;
    output_ = std::make_unique<OutputSink>(worldSize_, o_.tagOutput.value_or(worldSize_ > 1), o_.outputDir);
    while (true) {
      spec.generation = static_cast<int>(outcomes_.size());
      RunMetrics::get().generationStarted(spec.generation);
      outcomes_.push_back(runGeneration(spec, *output_));
      spec.usedStorePorts.push_back(outcomes_.back().storePort);
      RunMetrics::get().generationEnded();
      GenerationOutcome& last = outcomes_.back();
      if (!shouldRestart(last, spec.generation, o_.maxRestarts)) break;
      // Ctrl-C while the failed generation was being stopped: no restart.
      if (const int sig = interruptSignal()) {
        last.interrupt = sig;
        break;
      }
      const int restart = spec.generation + 1;
      std::fprintf(stderr, "gyre run: %s\n", restartLine(last, worldSize_, restart, o_.maxRestarts).c_str());
      output_->startGeneration(restart);
    }
    output_->flush();
    return report();
  }

 private:
  int report() {
    const GenerationOutcome& last = outcomes_.back();
    const int restarts = static_cast<int>(outcomes_.size()) - 1;
    int code = 0;
    if (!last.failures.empty()) {
      const Failure& cause = causeOf(last.failures);
      std::string line = "gyre run: " + cause.message;
      if (cause.rank >= 0) {
        const std::string log = output_->logPath(cause.rank);
        line += log.empty() ? "; its last output lines follow" : "; its output is in " + log;
      }
      std::vector<std::string> others;
      for (const Failure& f : last.failures)
        if (&f != &cause) others.push_back(f.message);
      if (!others.empty()) line += " (" + std::to_string(others.size()) + " other failure(s) after it)";
      std::fprintf(stderr, "%s\n", line.c_str());
      if (cause.rank >= 0 && output_->logPath(cause.rank).empty())
        for (const std::string& l : output_->tail(cause.rank))
          std::fprintf(stderr, "  [%d] %s\n", cause.rank, l.c_str());
      std::map<int, std::vector<std::string>> tails;
      for (const Failure& f : last.failures)
        if (f.rank >= 0) tails[f.rank] = output_->tail(f.rank);
      if (const std::vector<int> silent = unansweringRanks(tails, last.failures, last.answered); !silent.empty())
        std::fprintf(stderr,
                     "gyre run: rank(s) %s stopped answering: the failed workers timed out waiting for them, "
                     "and they had not failed (stopped, hung in their own code, or far slower than the others)\n",
                     rankList(silent).c_str());
      for (const std::string& m : others) std::fprintf(stderr, "gyre run:   also: %s\n", m.c_str());
      // A failure that came as Ctrl-C or --timeout stopped the job: say why it was not restarted.
      if (cause.restartable && restarts < o_.maxRestarts) {
        if (last.interrupt != 0)
          std::fprintf(stderr, "gyre run: interrupted by %s; not restarting\n",
                       signalName(last.interrupt).c_str());
        else if (last.timedOut)
          std::fprintf(stderr, "gyre run: the job ran past --timeout %s s; not restarting\n",
                       formatSeconds(o_.timeoutS).c_str());
      }
      code = cause.exitCode == 0 ? 1 : cause.exitCode;
    } else if (last.interrupt != 0) {
      std::fprintf(stderr, "gyre run: interrupted by %s; stopped every worker\n",
                   signalName(last.interrupt).c_str());
      code = 128 + last.interrupt;
    } else if (last.timedOut) {
      std::fprintf(stderr, "gyre run: the job ran past --timeout %s s; stopped it\n",
                   formatSeconds(o_.timeoutS).c_str());
      code = 124;
    } else if (restarts > 0) {
      std::fprintf(
          stderr,
          "gyre run: every worker succeeded in generation %d, after %d restart%s (--max-restarts %d)\n",
          restarts, restarts, restarts == 1 ? "" : "s", o_.maxRestarts);
    }
    if (code != 0)
      for (const std::string& l : storyLines(outcomes_, o_.maxRestarts))
        std::fprintf(stderr, "gyre run: %s\n", l.c_str());
    return code;
  }

  const RunOptions& o_;
  int worldSize_ = 0;
  std::unique_ptr<OutputSink> output_;
  std::vector<GenerationOutcome> outcomes_;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> forwardedEnvironment() {
  const std::span<const config::Knob> table = config::knobs();
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : config::processEnvironment()) {
    const std::string& name = entry.first;  // not a structured binding: the lambda captures it
    if (!name.starts_with("GYRE_")) continue;
    // The launcher sets these for each process itself (KnobOrigin::kLauncher).
    if (std::any_of(table.begin(), table.end(), [&](const config::Knob& k) {
          return k.name == name && k.origin == config::KnobOrigin::kLauncher;
        }))
      continue;
    out.emplace_back(name, entry.second);
  }
  return out;
}

namespace {

// Every number of RunOptions, each in the range --help states.
void checkRunNumbers(const RunOptions& o) {
  using numbers::kMaxSeconds;
  using numbers::kMinSeconds;
  constexpr std::int64_t kMaxCount = 1 << 20;  // workers, servers, threads, restarts
  numbers::checkInt("-np", o.np, 0, kMaxCount, "0: every slot of the hosts");
  numbers::check("--timeout", o.timeoutS, {.min = 0, .max = kMaxSeconds, .unit = "s", .note = "0: never"});
  numbers::check("--start-timeout", o.startTimeoutS, {.min = kMinSeconds, .max = kMaxSeconds, .unit = "s"});
  numbers::checkInt("--threads", o.threads, 0, kMaxCount, "0: cores / workers on the host");
  numbers::checkInt("--max-restarts", o.maxRestarts, 0, kMaxCount, "0: no restarts");
  numbers::checkInt("--servers", o.servers, 0, kMaxCount, "0: no parameter servers");
  numbers::checkInt("--min-np", o.minNp, 0, kMaxCount);
  numbers::checkInt("--max-np", o.maxNp, 0, kMaxCount);
  numbers::check("--discovery-interval", o.discoveryIntervalS,
                 {.min = kMinSeconds, .max = kMaxSeconds, .unit = "s"});
  numbers::check("--elastic-timeout", o.elasticTimeoutS, {.min = kMinSeconds, .max = kMaxSeconds, .unit = "s"});
}

}  // namespace

int runJob(const RunOptions& options) {
  GYRE_USAGE_CHECK(!options.program.empty(), "no program given: gyre run [options] -- PROGRAM [ARGS...]");
  checkRunNumbers(options);
  GYRE_USAGE_CHECK(options.serverHosts.empty() || options.servers > 0,
                   "--server-hosts needs --servers S: it says where the S parameter servers run");
  checkServerHosts(options.serverHosts);
  GYRE_USAGE_CHECK(!(options.elastic && options.keepGoing),
                   "--keep-going does not work with --elastic: an elastic job already goes on without a lost "
                   "worker, in a new membership");
  GYRE_USAGE_CHECK(
      !(options.elastic && options.servers > 0),
      "--servers does not work with --elastic yet: parameter servers need a fixed set of workers");
  GYRE_USAGE_CHECK(options.metricsPort == 0 || options.metricsPort + options.servers < 65536,
                   "--metrics-port ", options.metricsPort, " leaves no room for the ", options.servers,
                   " parameter servers' ports after it (METRICS_PORT + 1 + index)");
  // Before anything starts: a port in use is an error now, not after the workers ran.
  std::unique_ptr<metrics::Server> metricsServer;
  RunOptions o = options;
  if (o.metricsPort > 0) {
    metricsServer = std::make_unique<metrics::Server>(
        "0.0.0.0", o.metricsPort, [] { return RunMetrics::get().render(); }, "--metrics-port");
    if (o.servers > 0) o.exports.emplace_back("GYRE_PS_METRICS_PORT_BASE", std::to_string(o.metricsPort + 1));
  }
  if (!o.rdzv.empty()) return runRdzvJob(o);
  if (o.elastic) return runElasticJob(o);
  GYRE_USAGE_CHECK(o.minNp == 0 && o.maxNp == 0 && o.discoveryScript.empty(),
                   "--min-np, --max-np and --host-discovery-script need --elastic");
  return Job(o).run();
}

}  // namespace gyre::launcher
