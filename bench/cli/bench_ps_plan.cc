#include "bench_ps_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "bench_lists.h"
#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "train/options.h"

namespace gyre::app {
namespace {

// A whole decimal number without sign or spaces, or nullopt.
std::optional<std::uint64_t> parseDigits(const std::string& text) {
  if (text.empty() || text.size() > 15 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

}  // namespace

PsBenchPart parsePsBenchPart(const std::string& text) {
  if (text == "throughput") return PsBenchPart::kThroughput;
  if (text == "accuracy") return PsBenchPart::kAccuracy;
  if (text == "all") return PsBenchPart::kAll;
  GYRE_USAGE_ERROR("--part '", text, "': expected throughput, accuracy or all");
}

bool runsThroughput(PsBenchPart part) {
  return part != PsBenchPart::kAccuracy;
}
bool runsAccuracy(PsBenchPart part) {
  return part != PsBenchPart::kThroughput;
}

std::uint64_t parseSizeWithSuffix(const std::string& text, const std::string& flag) {
  std::string digits = text;
  std::uint64_t unit = 1;
  if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) unit = 1u << 10;
  if (!digits.empty() && (digits.back() == 'M' || digits.back() == 'm')) unit = 1u << 20;
  if (!digits.empty() && (digits.back() == 'G' || digits.back() == 'g')) unit = 1u << 30;
  if (unit > 1) digits.pop_back();
  const std::optional<std::uint64_t> n = parseDigits(digits);
  GYRE_USAGE_CHECK(n.has_value() && *n <= (std::uint64_t{1} << 40) / unit, flag, " '", text,
                   "': expected a count like 4M (4 x 2^20), 512K (512 x 2^10) or 100000");
  return *n * unit;
}

void validate(const ThroughputSettings& s) {
  GYRE_USAGE_CHECK(!s.servers.empty(), "--servers: nothing to run");
  GYRE_USAGE_CHECK(s.workers >= 1 && s.workers <= kMaxBenchCount, "--workers must be between 1 and ",
                   kMaxBenchCount, " (got ", s.workers, ")");
  GYRE_USAGE_CHECK(s.floats >= 64, "--floats ", s.floats,
                   " is too small: the model needs at least 64 floats");
  GYRE_USAGE_CHECK(s.floats <= (std::uint64_t{1} << 28), "--floats ", s.floats,
                   " is too large: at most 256M floats (1 GiB per copy)");
  for (int servers : s.servers)
    GYRE_USAGE_CHECK(static_cast<std::uint64_t>(servers) <= s.floats, "--servers ", servers,
                     " exceeds --floats ", s.floats);
  try {
    ps::Mode::parse(s.mode);
  } catch (const InvalidArgument&) {
    GYRE_USAGE_ERROR("--mode '", s.mode, "': expected bsp, asp or ssp:S (S >= 0 steps)");
  }
  GYRE_USAGE_CHECK(s.steps >= 0, "--steps must not be negative (got ", s.steps, ")");
  GYRE_USAGE_CHECK(s.steps > 0 || (s.seconds > 0 && s.seconds <= 3600),
                   "--seconds must be in (0, 3600] (got ", s.seconds, ")");
  GYRE_USAGE_CHECK(s.warmup >= 0, "--warmup must not be negative (got ", s.warmup, ")");
  GYRE_USAGE_CHECK(s.timeoutS > 0, "--op-timeout must be positive (got ", s.timeoutS, ")");
}

std::vector<std::size_t> throughputKeySizes(std::uint64_t total) {
  GYRE_ARG_CHECK(total >= 64, "the throughput model needs at least 64 floats, not ", total);
  static constexpr double kShares[] = {0.40, 0.30, 0.15, 0.10, 0.04, 0.01};
  std::vector<std::size_t> sizes;
  std::uint64_t used = 0;
  for (double share : kShares) {
    const auto size =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(share * static_cast<double>(total)));
    sizes.push_back(size);
    used += size;
  }
  // The shares sum to 1.00, so what is left is the rounding: at least one float, as a bias.
  if (used >= total) {
    sizes.front() -= used - total + 1;
    used = total - 1;
  }
  sizes.push_back(total - used);
  return sizes;
}

std::vector<std::string> parseTrainModes(const std::string& text) {
  std::vector<std::string> modes;
  for (const std::string& mode : splitCommas(text)) {
    bool ok = mode == "allreduce";
    if (!ok && mode.rfind("ps:", 0) == 0) {
      try {
        ps::Mode::parse(mode.substr(3));
        ok = true;
      } catch (const InvalidArgument&) {
      }
    }
    GYRE_USAGE_CHECK(ok, "--modes '", text, "': unknown mode '", mode,
                     "'; expected allreduce, ps:bsp, ps:asp or ps:ssp:S (S >= 0), separated by commas");
    GYRE_USAGE_CHECK(std::find(modes.begin(), modes.end(), mode) == modes.end(), "--modes '", text,
                     "': ", mode, " is given twice");
    modes.push_back(mode);
  }
  return modes;
}

bool isPsMode(const std::string& mode) {
  return mode.rfind("ps:", 0) == 0;
}

void validate(const AccuracySettings& s) {
  validate(static_cast<const AccuracyJob&>(s));
  GYRE_USAGE_CHECK(!s.modes.empty(), "--modes: nothing to run");
  GYRE_USAGE_CHECK(s.np >= 1 && s.np <= kMaxBenchCount, "--np must be between 1 and ", kMaxBenchCount,
                   " (got ", s.np, ")");
  GYRE_USAGE_CHECK(s.batch % s.np == 0, "--batch ", s.batch,
                   " is the global batch and must be a positive multiple of --np ", s.np);
  GYRE_USAGE_CHECK(s.servers >= 1 && s.servers <= kMaxBenchCount, "--train-servers must be between 1 and ",
                   kMaxBenchCount, " (got ", s.servers, ")");
  GYRE_USAGE_CHECK(s.stragglerFactor >= 1 && s.stragglerFactor <= 100,
                   "--straggler-factor must be in [1, 100] (got ", s.stragglerFactor,
                   "); 1 runs no straggler");
  GYRE_USAGE_CHECK(!hasStragglerRuns(s) || (s.stragglerRank >= 0 && s.stragglerRank < s.np),
                   "--straggler-rank ", s.stragglerRank, " is not a rank of the ", s.np, " workers (0 to ",
                   s.np - 1, ")");
  GYRE_USAGE_CHECK(!s.lr || *s.lr > 0, "--lr must be positive");
  GYRE_USAGE_CHECK(!s.momentum || *s.momentum >= 0, "--momentum must not be negative");
}

bool hasStragglerRuns(const AccuracySettings& s) {
  return s.stragglerFactor > 1;
}

std::string AccuracyRun::label() const {
  return straggler ? mode + " straggler" : mode;
}

std::string AccuracyRun::dirName() const {
  std::string name = mode;
  std::replace(name.begin(), name.end(), ':', '-');
  return straggler ? name + "-straggler" : name;
}

std::vector<AccuracyRun> planAccuracyRuns(const AccuracySettings& s) {
  std::vector<AccuracyRun> runs;
  for (const std::string& mode : s.modes) runs.push_back({mode, false});
  if (hasStragglerRuns(s))
    for (const std::string& mode : s.modes) runs.push_back({mode, true});
  return runs;
}

std::vector<std::string> trainArguments(const AccuracySettings& s, const AccuracyRun& run,
                                        const std::string& runDir) {
  train::TrainOptions o = trainOptionsOf(s, runDir);
  o.np = s.np;
  o.mode = run.mode;
  if (isPsMode(run.mode)) o.servers = s.servers;
  if (run.straggler) {
    o.stragglerRank = s.stragglerRank;
    o.stragglerFactor = s.stragglerFactor;
  }
  if (s.lr) o.lr = *s.lr;
  if (s.momentum) o.momentum = *s.momentum;
  std::vector<std::string> args = {"train"};
  const std::vector<std::string> flags = train::changedArguments(o, train::FlagScope::kLauncher);
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

std::optional<EvalPoint> parseEvalLine(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  try {
    return train::evalRecordFromJson(j);
  } catch (const Error& e) {
    throw Error(fmt::format("unexpected eval.jsonl line ({}): {}", e.what(), line));
  }
}

TimeToAccuracy timeToAccuracy(const std::vector<EvalPoint>& points, double target) {
  TimeToAccuracy t;
  t.evals = points.size();
  for (const EvalPoint& p : points) {
    t.bestAcc = std::max(t.bestAcc, p.testAccuracy);
    if (!t.reached && p.testAccuracy >= target) {
      t.reached = true;
      t.step = p.step;
      t.timeS = p.timeS;
    }
  }
  if (!points.empty()) {
    t.finalAcc = points.back().testAccuracy;
    t.lastStep = points.back().step;
    t.lastTimeS = points.back().timeS;
  }
  return t;
}

double trainingSamplesPerS(const TimeToAccuracy& t, int globalBatch) {
  if (t.lastTimeS <= 0) return 0;
  return static_cast<double>(t.lastStep) * globalBatch / t.lastTimeS;
}

std::string stalenessText(const StalenessSummary& s) {
  if (s.updates == 0) return "-";
  return fmt::format("{:.2f}/{}/{}/{}{}", s.mean, s.p50, s.p99, s.max, s.saturated ? "+" : "");
}

RunTotals parseMetricsLines(const std::vector<std::string>& lines) {
  RunTotals t;
  double samples = 0;
  for (const std::string& line : lines) {
    std::optional<train::EpochRecord> e;
    try {
      e = train::parseEpochRecord(line);
    } catch (const Error& x) {
      throw Error(fmt::format("unexpected metrics.jsonl line: {}", x.what()));
    }
    if (!e) continue;
    samples += e->samplesPerS * e->seconds;
    t.seconds += e->seconds;
    t.steps += e->steps;
    if (e->testAccuracy) t.testAcc = e->testAccuracy;
    if (e->staleness) {
      if (t.staleness.size() < e->staleness->size()) t.staleness.resize(e->staleness->size(), 0);
      for (std::size_t k = 0; k < e->staleness->size(); ++k) t.staleness[k] += (*e->staleness)[k];
      t.hasStaleness = true;
    }
    if (e->clockWaitS) t.clockWaitS += *e->clockWaitS;
    ++t.epochs;
  }
  t.samplesPerS = t.seconds > 0 ? samples / t.seconds : 0;
  return t;
}

void checkLaunchedPart(PsBenchPart part) {
  GYRE_USAGE_CHECK(
      part == PsBenchPart::kThroughput,
      "under gyre run --servers (GYRE_PS_SERVERS is set) gyre bench ps measures the throughput with the "
      "job's servers: pass --part throughput (the accuracy part starts its own jobs: run it outside gyre "
      "run)");
}

void checkLaunchedFlags(const PsBenchFlags& f, int jobServers) {
  if (f.serversGiven) {
    GYRE_USAGE_CHECK(
        f.servers.find(',') == std::string::npos, "--servers '", f.servers,
        "': under gyre run --servers the job has a fixed number of servers (", jobServers,
        "); give one value or none, and run one job per number of servers (tests/netns/ps_bound.sh)");
    GYRE_USAGE_CHECK(f.throughput.servers == std::vector<int>{jobServers}, "--servers ", f.servers,
                     " disagrees with the job's ", jobServers, " servers (gyre run --servers ", jobServers,
                     ")");
  }
  GYRE_USAGE_CHECK(!f.workersGiven,
                   "--workers: under gyre run --servers the workers are the job's ranks (gyre run -np/-H)");
}

}  // namespace gyre::app
