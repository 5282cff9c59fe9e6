#include "bench_parallel_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bench_lists.h"
#include "common/check.h"
#include "gyre/errors.h"

namespace gyre::app {

namespace {

constexpr int kMaxMicroBatches = 1024;

// The share of a step without compute allowed for a formula's: 10% of it (relative) + 0.02.
double bubbleBound(double ideal) {
  return ideal * 1.1 + 0.02;
}

const ParallelResult* findResult(const std::vector<ParallelResult>& results, int world, int pp,
                                 const std::string& schedule = {}, int m = 0, int zero = 0, int tp = 1,
                                 bool wide = false) {
  for (const ParallelResult& r : results)
    if (r.config.world == world && r.config.pp == pp && r.config.schedule == schedule &&
        r.config.microBatches == m && r.config.zero == zero && r.config.tp == tp &&
        (r.config.vitWidth > 0) == wide)
      return &r;
  return nullptr;
}

std::string percentText(double share) {
  return fmt::format("{:.1f}%", 100 * share);
}

// Row `r`'s samples/s over row `base`'s, at least `threshold`.
TargetCheck throughputRatio(const std::string& model, const std::string& name, const ParallelResult& r,
                            const std::string& rName, const ParallelResult& base, const std::string& baseName,
                            double threshold) {
  TargetCheck t;
  t.model = model;
  t.name = name;
  const double over = base.figures.run.samplesPerS;
  t.measured = over > 0 ? r.figures.run.samplesPerS / over : 0;
  t.threshold = threshold;
  t.definition = fmt::format("{} {:.0f} samples/s / {} {:.0f} >= {}", rName, r.figures.run.samplesPerS,
                             baseName, over, threshold);
  return t;
}

}  // namespace

void ParallelConfig::apply(train::TrainOptions& o, const std::string& balance) const {
  if (pp > 1) {
    o.pp = pp;
    o.schedule = schedule;
    o.microBatches = microBatches;
    o.balance = balance;
  }
  o.virtualStages = virtualStages;
  o.zero = zero;
  o.tp = tp;
  if (vitWidth > 0) {
    o.vitWidth = vitWidth;
    o.vitHeads = 8;
  }
}

std::vector<std::string> ParallelConfig::flags(const std::string& balance) const {
  train::TrainOptions o;
  apply(o, balance);
  return train::changedArguments(o, train::FlagScope::kWorker);
}

std::vector<int> parseMicroBatchList(const std::string& text) {
  return parseCountList(text, "--micro-batches", "counts", kMaxMicroBatches, "1,2,4,8,16");
}

std::vector<std::string> parseScheduleList(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& part : splitCommas(text)) {
    GYRE_USAGE_CHECK(part == "gpipe" || part == "1f1b" || part == "zero-bubble" || part == "interleaved",
                     "--schedule '", text, "': unknown schedule '", part,
                     "'; expected gpipe, 1f1b, zero-bubble or interleaved, separated by commas");
    GYRE_USAGE_CHECK(std::find(out.begin(), out.end(), part) == out.end(), "--schedule '", text, "': ", part,
                     " is given twice");
    out.push_back(part);
  }
  return out;
}

void validate(const ParallelBenchSettings& s) {
  GYRE_USAGE_CHECK(s.model == "mlp" || s.model == "cnn" || s.model == "vit", "--model '", s.model,
                   "': expected mlp, cnn or vit");
  GYRE_USAGE_CHECK(s.globalBatch >= 1 && s.globalBatch % 2 == 0, "--batch ", s.globalBatch,
                   " must divide evenly between 2 replicas");
  GYRE_USAGE_CHECK(s.steps >= 1 && s.skip >= 0 && s.skip < s.steps, "--skip ", s.skip,
                   " leaves none of --steps ", s.steps, " to time");
  GYRE_USAGE_CHECK(!s.schedules.empty() && !s.microBatches.empty(),
                   "no schedule or micro-batch count to run");
  const int most = *std::max_element(s.microBatches.begin(), s.microBatches.end());
  GYRE_USAGE_CHECK(s.globalBatch / 2 >= most, "--batch ", s.globalBatch, " leaves ", s.globalBatch / 2,
                   " samples per replica at dp = 2 x pp = 2, fewer than --micro-batches ", most);
  GYRE_USAGE_CHECK(s.balance == "even" || s.balance == "time", "--balance '", s.balance,
                   "': expected even or time");
  GYRE_USAGE_CHECK(s.virtualStages >= 2 && s.virtualStages <= 64,
                   "--virtual-stages must be between 2 and 64");
  GYRE_USAGE_CHECK(s.wideWidth >= 8 && s.wideWidth % 8 == 0 && s.wideBatch >= 2 && s.wideBatch % 2 == 0,
                   "the wide vit needs a width that 8 heads divide and an even batch");
  GYRE_USAGE_CHECK(s.timeoutS > 0, "--timeout must be positive");
  GYRE_USAGE_CHECK(s.repeat >= 1 && s.repeat <= 100, "--repeat must be between 1 and 100 (got ", s.repeat,
                   ")");
}

std::vector<ParallelConfig> planParallel(const ParallelBenchSettings& s) {
  auto layout = [](std::string name, int world, int pp = 1, std::string schedule = {}, int m = 0,
                   int zero = 0) {
    ParallelConfig c;
    c.name = std::move(name);
    c.world = world;
    c.pp = pp;
    c.schedule = std::move(schedule);
    c.microBatches = m;
    c.zero = zero;
    return c;
  };
  std::vector<ParallelConfig> plan = {
      layout("1 worker", 1), layout("dp=2", 2), layout("dp=2 zero-1", 2, 1, {}, 0, 1),
      layout("dp=2 zero-2", 2, 1, {}, 0, 2), layout("dp=2 zero-3", 2, 1, {}, 0, 3)};
  for (const std::string& schedule : s.schedules)
    for (int m : s.microBatches) {
      if (schedule != "interleaved") {
        plan.push_back(layout(fmt::format("pp=2 {} m={}", schedule, m), 2, 2, schedule, m));
      } else if (m % 2 == 0) {  // rounds of p micro-batches
        plan.push_back(
            layout(fmt::format("pp=2 interleaved v={} m={}", s.virtualStages, m), 2, 2, schedule, m));
        plan.back().virtualStages = s.virtualStages;
      }
    }
  int m = s.microBatches.front();
  for (int candidate : s.microBatches)
    if (candidate <= 8 && (m > 8 || candidate > m)) m = candidate;
  plan.push_back(layout(fmt::format("dp=2 x pp=2 1f1b m={}", m), 4, 2, "1f1b", m));
  plan.push_back(layout("dp=4", 4));
  plan.push_back(layout("dp=4 zero-3", 4, 1, {}, 0, 3));
  if (s.model != "vit") return plan;  // tensor parallelism splits the vit's blocks
  plan.push_back(layout("tp=2", 2));
  plan.push_back(layout("dp=2 x tp=2", 4));
  plan[plan.size() - 2].tp = plan.back().tp = 2;
  for (int tp : {1, 2}) {
    plan.push_back(layout(
        tp == 1 ? fmt::format("1 worker w{}", s.wideWidth) : fmt::format("tp=2 w{}", s.wideWidth), tp));
    plan.back().tp = tp;
    plan.back().vitWidth = s.wideWidth;
    plan.back().batch = s.wideBatch;
  }
  return plan;
}

std::vector<std::string> parallelRunArguments(const ParallelBenchSettings& s, const ParallelConfig& c,
                                              const std::string& worker) {
  const int batch = c.batch > 0 ? c.batch : s.globalBatch;
  const EpochSplit split = splitSteps(s.steps, batch);
  std::vector<std::string> args = {
      "run", "--np", std::to_string(c.world), "--threads", "1", "--no-tag-output", "--", worker};
  train::TrainOptions o;
  o.model = s.model;
  o.epochs = split.epochs;
  o.maxSteps = split.stepsPerEpoch;
  o.batch = batch;
  o.skipSteps = s.skip;
  o.threads = 1;
  o.eval = false;
  o.json = true;
  o.progress = "off";
  c.apply(o, s.balance);
  const std::vector<std::string> flags = train::changedArguments(o, train::FlagScope::kWorker);
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

std::optional<ParallelFigures> parseParallelLine(const std::string& line) {
  std::optional<train::EpochRecord> e;
  try {
    e = train::parseEpochRecord(line);
  } catch (const Error& x) {
    throw Error(fmt::format("unexpected epoch line: {}", x.what()));
  }
  if (!e) return std::nullopt;
  ParallelFigures f;
  f.run = figuresOf(*e);
  f.peakRssBytes = e->peakRssBytes;
  f.modelStateBytes = e->modelStateBytes;
  if (const auto& p = e->pipeline) {
    f.bubble = p->bubble;
    f.idealBubble = p->idealBubble;
    f.stageTimesBubble = p->stageTimesBubble;
    f.peakActivationBytes = p->peakActivationBytes;
    f.balance = p->balance;
  }
  return f;
}

ParallelFigures combineParallel(const std::vector<ParallelFigures>& epochs) {
  ParallelFigures total;
  if (epochs.empty()) return total;
  std::vector<RunFigures> runs;
  double bubbleTime = 0, stagesTime = 0;
  for (const ParallelFigures& e : epochs) {
    runs.push_back(e.run);
    total.peakRssBytes = std::max(total.peakRssBytes, e.peakRssBytes);
    if (e.modelStateBytes)
      total.modelStateBytes = std::max(total.modelStateBytes.value_or(0), *e.modelStateBytes);
    if (e.peakActivationBytes)
      total.peakActivationBytes = std::max(total.peakActivationBytes.value_or(0), *e.peakActivationBytes);
    if (e.bubble) bubbleTime += *e.bubble * e.run.seconds;
    if (e.stageTimesBubble) stagesTime += *e.stageTimesBubble * e.run.seconds;
  }
  total.run = combineEpochs(runs);
  if (epochs.back().bubble)
    total.bubble = total.run.seconds > 0 ? bubbleTime / total.run.seconds : *epochs.back().bubble;
  if (epochs.back().stageTimesBubble)
    total.stageTimesBubble =
        total.run.seconds > 0 ? stagesTime / total.run.seconds : *epochs.back().stageTimesBubble;
  total.idealBubble = epochs.back().idealBubble;
  total.balance = epochs.back().balance;
  return total;
}

std::vector<TargetCheck> evaluateParallelTargets(const std::string& model,
                                                 const std::vector<ParallelResult>& results) {
  std::vector<TargetCheck> checks;
  // The bubble of GPipe and 1F1B, p = 2, every m >= 4 that ran.
  for (const ParallelResult& r : results) {
    const ParallelConfig& c = r.config;
    if (c.world != 2 || c.pp != 2 || c.microBatches < 4 || (c.schedule != "gpipe" && c.schedule != "1f1b") ||
        !r.figures.bubble)
      continue;
    TargetCheck t;
    t.model = model;
    t.name = fmt::format("bubble {} m={}", c.schedule, c.microBatches);
    t.measured = *r.figures.bubble;
    t.threshold = bubbleBound(*r.figures.idealBubble);
    t.atMost = true;
    t.definition = fmt::format("measured bubble {} <= formula {} x 1.1 + 0.02 = {}", percentText(*t.measured),
                               percentText(*r.figures.idealBubble), percentText(*t.threshold));
    if (r.figures.stageTimesBubble)
      t.definition +=
          fmt::format(" (the measured stages alone make {})", percentText(*r.figures.stageTimesBubble));
    checks.push_back(t);
  }
  // Zero-bubble's below 1F1B's at the same m.
  for (const ParallelResult& r : results) {
    const ParallelConfig& c = r.config;
    if (c.world != 2 || c.schedule != "zero-bubble" || !r.figures.bubble) continue;
    const ParallelResult* f = findResult(results, 2, 2, "1f1b", c.microBatches);
    if (f == nullptr || !f->figures.bubble) continue;
    TargetCheck t;
    t.model = model;
    t.name = fmt::format("zero-bubble below 1f1b m={}", c.microBatches);
    t.measured = *r.figures.bubble - *f->figures.bubble;
    t.threshold = 0;
    t.atMost = true;
    t.definition = fmt::format("zero-bubble {} - 1f1b {} < 0", percentText(*r.figures.bubble),
                               percentText(*f->figures.bubble));
    checks.push_back(t);
  }
  // 1F1B's activations at the largest m against GPipe's: at most (p + 1) / m.
  int largest = 0;
  for (const ParallelResult& r : results)
    if (r.config.world == 2 && r.config.pp == 2) largest = std::max(largest, r.config.microBatches);
  if (const ParallelResult* one = findResult(results, 2, 2, "1f1b", largest),
      *gpipe = findResult(results, 2, 2, "gpipe", largest);
      largest >= 4 && one != nullptr && gpipe != nullptr && one->figures.peakActivationBytes &&
      gpipe->figures.peakActivationBytes && *gpipe->figures.peakActivationBytes > 0) {
    TargetCheck t;
    t.model = model;
    t.name = fmt::format("1f1b activations m={}", largest);
    t.measured = static_cast<double>(*one->figures.peakActivationBytes) /
                 static_cast<double>(*gpipe->figures.peakActivationBytes);
    t.threshold = 3.0 / largest;
    t.atMost = true;
    t.definition =
        fmt::format("1f1b {} B / gpipe {} B <= (p + 1) / m = 3/{}", *one->figures.peakActivationBytes,
                    *gpipe->figures.peakActivationBytes, largest);
    checks.push_back(t);
  }
  // pp = 2, 1F1B, m = 8 against the ideal 2 x one worker x (1 - formula).
  const ParallelResult* single = findResult(results, 1, 1);
  if (const ParallelResult* r = findResult(results, 2, 2, "1f1b", 8); r != nullptr && single != nullptr) {
    const double ideal = 2 * single->figures.run.samplesPerS * (1 - r->figures.idealBubble.value_or(0));
    TargetCheck t;
    t.model = model;
    t.name = "1f1b m=8 throughput";
    t.measured = ideal > 0 ? r->figures.run.samplesPerS / ideal : 0;
    t.threshold = 0.85;
    t.definition =
        fmt::format("{:.0f} samples/s / (2 x {:.0f} x (1 - {})) >= 0.85", r->figures.run.samplesPerS,
                    single->figures.run.samplesPerS, percentText(r->figures.idealBubble.value_or(0)));
    checks.push_back(t);
  }
  // ZeRO-3: each worker's training state at most 1/N of plain data parallelism's + 10%, and at
  // N = 2 at least 0.85 of its throughput.
  for (int world : {2, 4}) {
    const ParallelResult* plain = findResult(results, world, 1);
    const ParallelResult* zero = findResult(results, world, 1, {}, 0, 3);
    if (plain == nullptr || zero == nullptr || !plain->figures.modelStateBytes ||
        !zero->figures.modelStateBytes)
      continue;
    TargetCheck t;
    t.model = model;
    t.name = fmt::format("zero-3 state N={}", world);
    t.measured = static_cast<double>(*zero->figures.modelStateBytes) /
                 static_cast<double>(*plain->figures.modelStateBytes);
    t.threshold = 1.1 / world;
    t.atMost = true;
    t.definition = fmt::format("zero-3 {} B / dp={} {} B <= 1.1 / {}", *zero->figures.modelStateBytes, world,
                               *plain->figures.modelStateBytes, world);
    checks.push_back(t);
  }
  if (const ParallelResult* plain = findResult(results, 2, 1), *zero = findResult(results, 2, 1, {}, 0, 3);
      plain != nullptr && zero != nullptr)
    checks.push_back(throughputRatio(model, "zero-3 throughput N=2", *zero, "zero-3", *plain, "dp=2", 0.85));
  // tp = 2 on the wide vit: at least 1.3 × one worker.
  if (const ParallelResult* one = findResult(results, 1, 1, {}, 0, 0, 1, true),
      *two = findResult(results, 2, 1, {}, 0, 0, 2, true);
      one != nullptr && two != nullptr)
    checks.push_back(throughputRatio(fmt::format("vit w{}", two->config.vitWidth), "tp=2 throughput", *two,
                                     "tp=2", *one, "1 worker", 1.3));
  return checks;
}

}  // namespace gyre::app
