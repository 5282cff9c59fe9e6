#include "bench_train_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <numeric>

#include "bench_lists.h"
#include "common/check.h"
#include "gyre/errors.h"
#include "train/options.h"
#include "train/records.h"

namespace gyre::app {
namespace {

// The throughput goals for global batch 128 (docs/benchmarks.md).
struct ModelTargets {
  double vsBestPlain;
  double vsDdp;
};
ModelTargets targetsFor(const std::string& model) {
  if (model == "cnn") return {1.4, 1.1};
  return {1.0, 1.8};  // mlp
}
constexpr double kMaxOverhead = 0.03;
constexpr double kMinEfficiency = 0.92;

const ConfigResult* find(const std::vector<ConfigResult>& results, TrainRunner runner, int world,
                         int referenceFor = 0, std::optional<ThreadPair> threads = std::nullopt) {
  for (const ConfigResult& r : results) {
    const TrainConfig& c = r.config;
    if (c.runner == runner && c.world == world && c.referenceFor == referenceFor &&
        (!threads || c.threads == *threads))
      return &r;
  }
  return nullptr;
}

std::string threadsText(const ThreadPair& t) {
  return fmt::format("{}:{}", t.torch, t.blas);
}

}  // namespace

const char* toString(TrainRunner runner) {
  switch (runner) {
    case TrainRunner::kPlain:
      return "plain";
    case TrainRunner::kGyre:
      return "gyre";
    case TrainRunner::kDdp:
      return "ddp";
  }
  return "invalid";
}

std::string TrainConfig::label() const {
  if (runner == TrainRunner::kDdp) return "ddp gloo";
  if (referenceFor > 0 && world > 1) return fmt::format("plain ref E({}) x{}", referenceFor, world);
  if (referenceFor > 0) return fmt::format("plain ref E({})", referenceFor);
  return toString(runner);
}

std::vector<int> parseWorldList(const std::string& text) {
  return parseCountList(text, "--np", "worker counts", kMaxBenchCount, "1,2");
}

std::vector<std::string> parseModelList(const std::string& text) {
  std::vector<std::string> models;
  for (const std::string& m : splitCommas(text)) {
    GYRE_USAGE_CHECK(m == "mlp" || m == "cnn", "--model '", text, "': unknown model '", m,
                     "'; expected mlp, cnn or mlp,cnn");
    GYRE_USAGE_CHECK(std::find(models.begin(), models.end(), m) == models.end(), "--model '", text, "': ", m,
                     " is given twice");
    models.push_back(m);
  }
  return models;
}

std::vector<ThreadPair> parseThreadsGrid(const std::string& text) {
  if (text == "default") return TrainBenchSettings{}.plainThreads;
  std::vector<ThreadPair> grid;
  for (const std::string& part : splitCommas(text)) {
    const std::size_t colon = part.find(':');
    std::optional<int> torch, blas;
    if (colon != std::string::npos) {
      torch = parseCount(part.substr(0, colon), kMaxBenchCount);
      blas = parseCount(part.substr(colon + 1), kMaxBenchCount);
    }
    GYRE_USAGE_CHECK(torch && blas, "--threads-grid '", text,
                     "': expected `default` or TORCH:BLAS thread pairs (each 1 to ", kMaxBenchCount,
                     ") separated by commas, like 1:1,1:2,2:2");
    const ThreadPair pair{*torch, *blas};
    GYRE_USAGE_CHECK(std::find(grid.begin(), grid.end(), pair) == grid.end(), "--threads-grid '", text,
                     "': ", part, " is given twice");
    grid.push_back(pair);
  }
  return grid;
}

int defaultSteps(const std::string& model) {
  return model == "cnn" ? 120 : 900;
}

void validate(const TrainBenchSettings& s) {
  GYRE_USAGE_CHECK(!s.models.empty() && !s.worlds.empty() && !s.plainThreads.empty(), "nothing to run");
  GYRE_USAGE_CHECK(s.globalBatch >= 1, "--batch must be at least 1 (got ", s.globalBatch, ")");
  for (int w : s.worlds)
    GYRE_USAGE_CHECK(s.globalBatch % w == 0, "--batch ", s.globalBatch, " is not divisible by ", w,
                     " workers: the global batch is split evenly (", s.globalBatch, " / ", w, ")");
  GYRE_USAGE_CHECK(s.globalBatch <= kTrainSamples, "--batch ", s.globalBatch,
                   " is larger than the training set (", kTrainSamples, " samples)");
  GYRE_USAGE_CHECK(s.steps >= 0, "--steps must be at least 1 (or 0 for the default)");
  GYRE_USAGE_CHECK(s.skip >= 0, "--skip must not be negative (got ", s.skip, ")");
  for (const std::string& m : s.models) {
    const int steps = s.steps > 0 ? s.steps : defaultSteps(m);
    GYRE_USAGE_CHECK(s.skip < steps, "--skip ", s.skip, " leaves no timed step of the ", steps, " steps of ",
                     m);
  }
}

TrainBenchSettings trainSettingsFrom(const TrainBenchFlags& f) {
  TrainBenchSettings s;
  s.models = parseModelList(f.models);
  s.worlds = parseWorldList(f.np);
  s.globalBatch = f.batch;
  s.steps = f.steps;
  s.skip = f.skip;
  s.plainThreads = parseThreadsGrid(f.threadsGrid);
  s.ddp = f.baseline == "ddp";
  validate(s);
  GYRE_USAGE_CHECK(f.repeat >= 1, "--repeat must be at least 1 (got ", f.repeat, ")");
  GYRE_USAGE_CHECK(f.timeoutS > 0, "--timeout must be positive");
  return s;
}

std::vector<TrainConfig> planModel(const TrainBenchSettings& s, const std::string& model) {
  TrainConfig base;
  base.model = model;
  base.globalBatch = s.globalBatch;
  base.steps = s.steps > 0 ? s.steps : defaultSteps(model);
  base.skip = s.skip;
  std::vector<TrainConfig> plan;
  for (const ThreadPair& t : s.plainThreads) {
    TrainConfig c = base;
    c.threads = t;
    plan.push_back(c);
  }
  for (int w : s.worlds) {
    if (w == 1) continue;
    TrainConfig c = base;
    c.globalBatch = s.globalBatch / w;  // one worker's share: same steps, batch B/W
    c.referenceFor = w;
    plan.push_back(c);
    c.world = w;  // W of them side by side, at batch B/W each
    c.globalBatch = s.globalBatch;
    plan.push_back(c);
  }
  for (int w : s.worlds) {
    TrainConfig c = base;
    c.runner = TrainRunner::kGyre;
    c.world = w;
    plan.push_back(c);
  }
  if (s.ddp) {
    for (int w : s.worlds) {
      if (w == 1) continue;
      TrainConfig c = base;
      c.runner = TrainRunner::kDdp;
      c.world = w;
      plan.push_back(c);
    }
  }
  return plan;
}

EpochSplit splitSteps(int steps, int globalBatch) {
  const int perEpoch = std::max(1, kTrainSamples / std::max(1, globalBatch));
  EpochSplit split;
  split.epochs = (steps + perEpoch - 1) / perEpoch;
  split.epochs = std::max(1, split.epochs);
  split.stepsPerEpoch = (steps + split.epochs - 1) / split.epochs;
  return split;
}

std::vector<std::string> trainRunArgv(const TrainConfig& c, const TrainBenchFlags& f,
                                      const TrainPrograms& p) {
  const EpochSplit split = splitSteps(c.steps, c.globalBatch);
  std::vector<std::string> argv;
  if (c.runner == TrainRunner::kDdp) {
    // The DDP script's own flags (bench/ddp_train.py), all given: its defaults are not gyre's.
    argv = {p.python,       p.ddpScript,
            "--world",      std::to_string(c.world),
            "--skip-steps", std::to_string(c.skip),
            "--model",      c.model,
            "--epochs",     std::to_string(split.epochs),
            "--max-steps",  std::to_string(split.stepsPerEpoch),
            "--batch",      std::to_string(c.globalBatch),
            "--lr",         fmt::format("{}", f.lr),
            "--momentum",   fmt::format("{}", f.momentum),
            "--seed",       std::to_string(f.seed),
            "--threads",    std::to_string(c.threads.torch)};
    if (!f.dataDir.empty()) argv.insert(argv.end(), {"--data-dir", f.dataDir});
    return argv;
  }
  if (c.runner != TrainRunner::kDdp && c.world > 1)
    argv = {p.self,
            "run",
            "--np",
            std::to_string(c.world),
            "--threads",
            std::to_string(c.threads.torch),
            "--no-tag-output",
            "--"};
  argv.push_back(p.worker);
  train::TrainOptions o;
  o.plain = c.runner == TrainRunner::kPlain;
  o.model = c.model;
  o.epochs = split.epochs;
  o.maxSteps = split.stepsPerEpoch;
  o.batch = o.plain ? c.batchPerProcess() : c.globalBatch;  // each plain loop on its own
  o.lr = f.lr;
  o.momentum = f.momentum;
  o.seed = static_cast<std::uint64_t>(f.seed);
  o.threads = c.threads.torch;
  o.dataDir = f.dataDir;
  o.skipSteps = c.skip;
  o.eval = false;
  o.json = true;
  o.progress = "off";
  if (c.runner == TrainRunner::kGyre) o.compression = f.compression;
  o.shardOptimizer = c.runner == TrainRunner::kGyre && c.world > 1 && f.shardOptimizer;
  const std::vector<std::string> flags = train::changedArguments(o, train::FlagScope::kWorker);
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

std::vector<std::pair<std::string, std::string>> threadEnvironment(const ThreadPair& t) {
  const std::string blas = std::to_string(t.blas);
  return {{"OPENBLAS_NUM_THREADS", blas},
          {"OMP_NUM_THREADS", blas},
          {"MKL_NUM_THREADS", blas},
          {"GYRE_NUM_THREADS", std::to_string(t.torch)}};
}

std::optional<RunFigures> parseEpochLine(const std::string& line) {
  try {
    const std::optional<train::EpochRecord> e = train::parseEpochRecord(line);
    if (!e) return std::nullopt;
    return figuresOf(*e);
  } catch (const Error& x) {
    throw Error(fmt::format("unexpected epoch line: {}", x.what()));
  }
}

RunFigures figuresOf(const train::EpochRecord& e) {
  RunFigures f;
  f.samplesPerS = e.samplesPerS;
  f.seconds = e.seconds;
  f.steps = e.timedSteps;
  f.hasSplit = e.computeS > 0;  // the DDP baseline records no step split
  f.computeS = e.computeS;
  f.communicateS = e.communicateS;
  f.waitS = e.waitS;
  f.hiddenS = e.hiddenS;
  f.torchThreads = e.torchThreads;
  f.blasThreads = e.blasThreads.value_or(0);
  f.loss = e.loss;
  return f;
}

RunFigures combineEpochs(const std::vector<RunFigures>& epochs) {
  RunFigures total;
  if (epochs.empty()) return total;
  double samples = 0;
  total.hasSplit = true;
  for (const RunFigures& e : epochs) {
    samples += e.samplesPerS * e.seconds;
    total.seconds += e.seconds;
    total.steps += e.steps;
    total.hasSplit = total.hasSplit && e.hasSplit;
    total.computeS += e.computeS;
    total.communicateS += e.communicateS;
    total.waitS += e.waitS;
    total.hiddenS += e.hiddenS;
  }
  total.samplesPerS = total.seconds > 0 ? samples / total.seconds : 0;
  total.torchThreads = epochs.back().torchThreads;
  total.blasThreads = epochs.back().blasThreads;
  total.loss = epochs.back().loss;
  return total;
}

Pick parsePick(const std::string& name) {
  if (name == "best") return Pick::kBest;
  if (name == "median") return Pick::kMedian;
  GYRE_USAGE_ERROR("--pick '", name, "': expected best or median");
}

const char* toString(Pick pick) {
  return pick == Pick::kBest ? "best" : "median";
}

std::size_t pickRun(const std::vector<RunFigures>& runs, Pick pick) {
  GYRE_ARG_CHECK(!runs.empty(), "no runs to pick from");
  std::vector<std::size_t> order(runs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return runs[a].samplesPerS > runs[b].samplesPerS; });
  if (pick == Pick::kBest) return order.front();
  return order[runs.size() / 2];  // fastest first: for an even count, the slower middle run
}

ConfigResult resultOf(const TrainConfig& c, const std::vector<RunFigures>& runs, Pick pick) {
  ConfigResult r{c, runs[pickRun(runs, pick)], {}};
  for (const RunFigures& run : runs) r.runSamplesPerS.push_back(run.samplesPerS);
  return r;
}

std::string TargetCheck::status() const {
  if (!measured) return "SKIP";
  if (!threshold) return "info";
  const bool pass = atMost ? *measured <= *threshold : *measured >= *threshold;
  return pass ? "PASS" : "MISS";
}

std::vector<TargetCheck> evaluateTargets(const std::string& model, const std::vector<ConfigResult>& results,
                                         bool ddpRequested, const std::string& ddpSkipReason) {
  std::vector<TargetCheck> checks;
  const ModelTargets t = targetsFor(model);
  const ConfigResult* plain11 = find(results, TrainRunner::kPlain, 1, 0, ThreadPair{1, 1});
  const ConfigResult* bestPlain = nullptr;
  for (const ConfigResult& r : results)
    if (r.config.runner == TrainRunner::kPlain && r.config.referenceFor == 0 &&
        (!bestPlain || r.figures.samplesPerS > bestPlain->figures.samplesPerS))
      bestPlain = &r;
  const ConfigResult* gyre1 = find(results, TrainRunner::kGyre, 1);

  if (gyre1) {
    TargetCheck c{model, "1 worker overhead", "", {}, kMaxOverhead, true, ""};
    if (plain11) {
      c.measured = 1.0 - gyre1->figures.samplesPerS / plain11->figures.samplesPerS;
      c.definition = fmt::format("1 - gyre(1) / plain 1:1 = 1 - {:.0f} / {:.0f} (slower share)",
                                 gyre1->figures.samplesPerS, plain11->figures.samplesPerS);
    } else {
      c.skipped = "no plain run with 1:1 threads in --threads-grid";
    }
    checks.push_back(c);
  }

  for (const ConfigResult& g : results) {
    if (g.config.runner != TrainRunner::kGyre || g.config.world == 1) continue;
    const int w = g.config.world;
    const double thr = g.figures.samplesPerS;
    const bool goalTarget = w == 2;  // the goals are set for two workers

    TargetCheck e{model, fmt::format("E({})", w), "", {}, std::nullopt, false, ""};
    if (goalTarget) e.threshold = kMinEfficiency;
    if (const ConfigResult* ref = find(results, TrainRunner::kPlain, 1, w)) {
      e.measured = thr / (w * ref->figures.samplesPerS);
      e.definition = fmt::format("gyre({}) / ({} x plain batch {} 1:1) = {:.0f} / ({} x {:.0f})", w, w,
                                 ref->config.globalBatch, thr, w, ref->figures.samplesPerS);
    } else {
      e.skipped = "no per-worker plain reference";
    }
    checks.push_back(e);

    // What W processes reach on this machine with nothing to exchange: E(W) cannot pass it.
    TargetCheck ceiling{model, fmt::format("E({}) ceiling", w), "", {}, std::nullopt, false, ""};
    const ConfigResult* ref = find(results, TrainRunner::kPlain, 1, w);
    const ConfigResult* apart = find(results, TrainRunner::kPlain, w, w);
    if (ref && apart) {
      ceiling.measured = apart->figures.samplesPerS / (w * ref->figures.samplesPerS);
      ceiling.definition = fmt::format("{} plain batch {} side by side / ({} x plain batch {} 1:1) = {:.0f} / ({} x {:.0f})",
                                       w, ref->config.globalBatch, w, ref->config.globalBatch,
                                       apart->figures.samplesPerS, w, ref->figures.samplesPerS);
    } else {
      ceiling.skipped = "no plain references side by side";
    }
    checks.push_back(ceiling);

    TargetCheck p{model, fmt::format("{} workers / best plain", w), "", {}, std::nullopt, false, ""};
    if (goalTarget) p.threshold = t.vsBestPlain;
    if (bestPlain) {
      p.measured = thr / bestPlain->figures.samplesPerS;
      p.definition = fmt::format("gyre({}) / plain {} = {:.0f} / {:.0f}", w,
                                 threadsText(bestPlain->config.threads), thr, bestPlain->figures.samplesPerS);
    } else {
      p.skipped = "no plain run";
    }
    checks.push_back(p);

    if (gyre1) {
      TargetCheck s{model, fmt::format("S({})", w), "", {}, std::nullopt, false, ""};
      s.measured = thr / gyre1->figures.samplesPerS;
      s.definition = fmt::format("gyre({}) / gyre(1) = {:.0f} / {:.0f}", w, thr, gyre1->figures.samplesPerS);
      checks.push_back(s);
    }

    if (ddpRequested) {
      TargetCheck d{model, fmt::format("{} workers / DDP({})", w, w), "", {}, std::nullopt, false, ""};
      if (goalTarget) d.threshold = t.vsDdp;
      if (const ConfigResult* ddp = find(results, TrainRunner::kDdp, w)) {
        d.measured = thr / ddp->figures.samplesPerS;
        d.definition =
            fmt::format("gyre({}) / ddp gloo({}) = {:.0f} / {:.0f}", w, w, thr, ddp->figures.samplesPerS);
      } else {
        d.skipped = ddpSkipReason.empty() ? "no DDP result" : ddpSkipReason;
      }
      checks.push_back(d);
    }
  }
  return checks;
}

}  // namespace gyre::app
