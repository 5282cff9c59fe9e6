// gyre_rl_worker: one process of `gyre rl`. Every process is a gyre::rt runtime of the job (its
// rank, size, store and secret from the launcher's variables); rank 0 runs the learner, which
// places the rollout actors on the others, and writes the live line, metrics.jsonl and return.svg;
// the others serve until rank 0 says it is done. Run alone, it is a world of one (the actors in
// this process). Each process writes its pid to RUN_DIR/rank-<r>.pid (for fault-injection runs).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rt.h"
#include "plot/svg_chart.h"
#include "rl/cli/options.h"
#include "rl/learn/learners.h"
#include "torch/compute_threads.h"

namespace {

namespace fs = std::filesystem;
using gyre::rl::RlProgress;

constexpr const char* kDoneKey = "gyre-rl/done";

nlohmann::json record(const RlProgress& p) {
  return {{"time_s", p.seconds},
          {"env_steps", p.envSteps},
          {"env_steps_per_s", p.envStepsPerS},
          {"updates", p.updates},
          {"updates_per_s", p.updatesPerS},
          {"episodes", p.episodes},
          {"return_mean_100", p.actorReturn100},
          {"eval_episodes", p.evalEpisodes},
          {"eval_return_mean_100", p.evalReturn100},
          {"actors_restarted", p.actorsRestarted}};
}

// The greedy and the actors' mean returns against time.
void writePlot(const std::string& path, const std::vector<RlProgress>& history,
               const gyre::rl::RlOptions& o) {
  gyre::plot::Chart chart;
  chart.title =
      fmt::format("gyre rl: {} on {}, {} actor{}", o.algo, o.env, o.actors, o.actors == 1 ? "" : "s");
  chart.xLabel = "time (s)";
  chart.yLabel = "mean return of the last 100 episodes";
  gyre::plot::Series greedy, actors, target;
  greedy.label = "greedy evaluation";
  actors.label = "rollout actors (with their ε)";
  target.label = "target";
  target.dashed = true;
  for (const RlProgress& p : history) {
    if (p.evalEpisodes > 0) {
      greedy.x.push_back(p.seconds);
      greedy.y.push_back(p.evalReturn100);
    }
    if (p.episodes > 0) {
      actors.x.push_back(p.seconds);
      actors.y.push_back(p.actorReturn100);
    }
  }
  if (!history.empty()) {
    target.x = {0, history.back().seconds};
    target.y = {o.targetReturn, o.targetReturn};
  }
  chart.series = {greedy, actors, target};
  std::ofstream out(path);
  out << gyre::plot::svg(chart);
}

int learner(gyre::rt::Runtime& rt, const gyre::rl::RlOptions& o) {
  std::ofstream metrics(fs::path(o.runDir) / "metrics.jsonl");
  if (!metrics) throw gyre::Error("cannot write " + (fs::path(o.runDir) / "metrics.jsonl").string());
  std::vector<RlProgress> history;
  const auto run = o.algo == "impala" ? gyre::rl::runImpala : o.algo == "ppo" ? gyre::rl::runPpo : gyre::rl::runApex;
  const RlProgress last = run(rt, o, [&](const RlProgress& p) {
    history.push_back(p);
    fmt::print(
        "{:7.1f} s  env steps {} ({:.0f}/s)  updates {} ({:.0f}/s)  return (last 100): actors {:.1f}, "
        "greedy {:.1f} ({} episodes){}\n",
        p.seconds, p.envSteps, p.envStepsPerS, p.updates, p.updatesPerS, p.actorReturn100, p.evalReturn100,
        p.evalEpisodes, p.actorsRestarted > 0 ? fmt::format("  actors restarted {}", p.actorsRestarted) : "");
    std::fflush(stdout);
    metrics << record(p).dump() << "\n" << std::flush;
  });
  nlohmann::json summary = record(last);
  summary["final"] = true;
  summary["solved"] = last.solved;
  summary["solved_at_s"] = last.solved ? nlohmann::json(last.solvedAtS) : nlohmann::json(nullptr);
  summary["target_return"] = o.targetReturn;
  metrics << summary.dump() << "\n";
  writePlot((fs::path(o.runDir) / "return.svg").string(), history, o);
  if (last.solved)
    fmt::print("solved in {:.1f} s: the mean greedy return of the last 100 episodes is {:.1f} (target {})\n",
               last.solvedAtS, last.evalReturn100, o.targetReturn);
  else
    fmt::print(
        "not solved: the mean greedy return of the last 100 episodes is {:.1f} (target {}) after {:.1f} s\n",
        last.evalReturn100, o.targetReturn, last.seconds);
  fmt::print("metrics: {}/metrics.jsonl, plot: {}/return.svg\n", o.runDir, o.runDir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gyre::rl::RlOptions o;
  CLI::App app{"gyre_rl_worker: one process of gyre rl (see gyre rl --help)"};
  gyre::rl::addRlFlags(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    gyre::rl::validateRlOptions(o);
    gyre::torch::setComputeThreads(1);  // the learners and actors use one thread each
    gyre::rt::RuntimeOptions ro = gyre::rt::RuntimeOptions::fromEnvironment();
    const std::shared_ptr<gyre::Store> store = ro.store;
    if (o.runDir.empty()) o.runDir = ".";
    fs::create_directories(o.runDir);
    std::ofstream(fs::path(o.runDir) / fmt::format("rank-{}.pid", ro.rank)) << ::getpid() << "\n";
    gyre::rt::Runtime rt(ro);
    if (rt.rank() != 0) {
      // Serve the actors placed here until the learner is done (or, with it gone, until the
      // launcher stops this process).
      store->get(kDoneKey,
                 std::chrono::milliseconds(static_cast<std::int64_t>(o.timeLimitS * 1000) + 600000));
      return 0;
    }
    const int code = learner(rt, o);
    if (store) store->setString(kDoneKey, "1");
    return code;
  } catch (const gyre::InvalidArgument& e) {
    std::fprintf(stderr, "gyre rl: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre rl: %s\n", e.what());
    return 1;
  }
}
