#include "bench_ps_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "gyre/errors.h"

namespace gyre::app {
namespace {

std::string loadText(const PsMachine& m) {
  return m.loadAverage < 0 ? "unknown" : fmt::format("{:.2f}", m.loadAverage);
}

nlohmann::ordered_json machineJson(const PsMachine& m) {
  nlohmann::ordered_json j;
  j["usable_cores"] = m.usableCores;
  j["online_cores"] = m.onlineCores;
  j["load_average"] = m.loadAverage < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(m.loadAverage);
  return j;
}

nlohmann::ordered_json stalenessJson(const std::vector<std::uint64_t>& counts) {
  const StalenessSummary s = summarizeStaleness(counts);
  // The counts without the zero tail, so small staleness reads at a glance.
  std::size_t used = counts.size();
  while (used > 0 && counts[used - 1] == 0) --used;
  nlohmann::ordered_json j;
  j["counts"] =
      std::vector<std::uint64_t>(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(used));
  j["updates"] = s.updates;
  j["mean"] = s.mean;
  j["p50"] = s.p50;
  j["p99"] = s.p99;
  j["max"] = s.max;
  j["max_saturated"] = s.saturated;
  return j;
}

// "428+1284,1284+428": each server's updates as the primary and as a backup.
std::string updatesText(const ThroughputPoint& p) {
  std::string text;
  for (std::size_t i = 0; i < p.serverUpdates.size(); ++i) {
    if (!text.empty()) text += ',';
    text += std::to_string(p.serverUpdates[i]);
    if (i < p.serverReplicated.size() && p.serverReplicated[i] > 0)
      text += '+' + std::to_string(p.serverReplicated[i]);
  }
  return text.empty() ? "-" : text;
}

// "0.85 in 41.2 s at step 350" or "best 0.812, target not reached".
std::string outcomeText(const AccuracyRow& r, double target) {
  if (r.tta.reached) return fmt::format("{} in {:.1f} s at step {}", target, r.tta.timeS, r.tta.step);
  return fmt::format("best accuracy {:.3f}, {} not reached", r.tta.bestAcc, target);
}

bool better(const AccuracyRow& a, const AccuracyRow& b) {
  if (a.tta.reached != b.tta.reached) return a.tta.reached;
  if (a.tta.reached) return a.tta.timeS < b.tta.timeS;
  return a.tta.bestAcc > b.tta.bestAcc;
}

std::string replicationText(const ThroughputSettings& s) {
  return s.replicate
             ? "With 2 or more servers each slice also has a backup on the next server, which applies "
               "every update as well."
             : "No replication (--no-replication): no backups.";
}

}  // namespace

std::string throughputSettingsText(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                   const PsMachine& m) {
  std::string keys;
  for (std::size_t k : keySizes) {
    if (!keys.empty()) keys += ", ";
    keys += std::to_string(k);
  }
  const std::string length = s.steps > 0 ? fmt::format("{} timed steps per worker", s.steps)
                                         : fmt::format("{} s per point", s.seconds);
  return fmt::format(
      "machine: {} usable cores ({} online), load average {} at the start. Servers and workers are threads "
      "of "
      "this one process over loopback TCP and share these cores: once servers + workers exceed them, more "
      "servers add no compute, only less work per server.\n"
      "model: {} float32 ({:.1f} MB) in {} keys of {} floats; mode {}, SGD on the servers; {} workers; {} "
      "after "
      "{} warm-up steps. A step: push every key, pull every key (all in flight at once), wait, clock(). {}\n",
      m.usableCores, m.onlineCores, loadText(m), s.floats, 4.0 * static_cast<double>(s.floats) / 1e6,
      keySizes.size(), keys, s.mode, s.workers, length, s.warmup, replicationText(s));
}

std::string launchedThroughputSettingsText(const ThroughputSettings& s,
                                           const std::vector<std::size_t>& keySizes,
                                           const ThroughputPoint& p) {
  const std::string length =
      s.steps > 0 ? fmt::format("{} timed steps per worker", s.steps) : fmt::format("about {} s", s.seconds);
  return fmt::format(
      "job: the {} worker(s) and {} server process(es) of gyre run --servers, where it placed them "
      "(--server-hosts); figures of all workers added up over the longest worker's timed seconds.\n"
      "model: {} float32 ({:.1f} MB) in {} keys; mode {}, SGD on the servers; {} after {} warm-up steps. A "
      "step: push every key, pull every key (all in flight at once), wait, clock(). {}\n",
      p.workers, p.servers, s.floats, 4.0 * static_cast<double>(s.floats) / 1e6, keySizes.size(), s.mode,
      length, s.warmup, replicationText(s));
}

nlohmann::ordered_json launchedThroughputJson(const ThroughputSettings& s,
                                              const std::vector<std::size_t>& keySizes,
                                              const ThroughputPoint& p, double minWorkerStepsPerS,
                                              const PsMachine& m) {
  nlohmann::ordered_json j;
  j["bench"] = "ps";
  j["part"] = "throughput";
  j["launched"] = true;
  j["servers"] = p.servers;
  j["workers"] = p.workers;
  j["floats"] = s.floats;
  j["key_sizes"] = keySizes;
  j["mode"] = s.mode;
  j["replicate"] = s.replicate;
  j["warmup_steps"] = s.warmup;
  j["steps"] = p.steps;
  j["seconds"] = p.seconds;
  j["steps_per_s"] = p.stepsPerS();
  j["worker_steps_per_s_min"] = minWorkerStepsPerS;
  j["bytes_pushed"] = p.bytesPushed;
  j["bytes_pulled"] = p.bytesPulled;
  j["mb_per_s"] = p.megabytesPerS();
  j["clock_wait_s"] = p.clockWaitS;
  j["staleness"] = stalenessJson(p.staleness);
  j["machine"] = machineJson(m);  // rank 0's host
  return j;
}

std::string throughputHeader(const ThroughputSettings& s) {
  (void)s;
  return fmt::format("{:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>7} {:>10} {:>20}  {}\n", "servers", "workers",
                     "steps", "seconds", "steps/s", "MB/s", "speedup", "clock wait", "stale mean/p50/p99/max",
                     "updates per server (+ as backup)");
}

std::string throughputRow(const ThroughputPoint& p, std::optional<double> referenceStepsPerS) {
  const std::string speedup = referenceStepsPerS && *referenceStepsPerS > 0
                                  ? fmt::format("{:.2f}", p.stepsPerS() / *referenceStepsPerS)
                                  : "-";
  return fmt::format("{:>7} {:>7} {:>7} {:>8.2f} {:>8.1f} {:>9.1f} {:>7} {:>9.2f}s {:>20}  {}\n", p.servers,
                     p.workers, p.steps, p.seconds, p.stepsPerS(), p.megabytesPerS(), speedup, p.clockWaitS,
                     stalenessText(summarizeStaleness(p.staleness)), updatesText(p));
}

const ThroughputPoint* throughputReference(const std::vector<ThroughputPoint>& points) {
  const ThroughputPoint* best = nullptr;
  for (const ThroughputPoint& p : points)
    if (best == nullptr || p.servers < best->servers) best = &p;
  return best;
}

std::string throughputSummary(const std::vector<ThroughputPoint>& points, const PsMachine& m) {
  const ThroughputPoint* ref = throughputReference(points);
  const ThroughputPoint* most = nullptr;
  for (const ThroughputPoint& p : points)
    if (most == nullptr || p.servers > most->servers) most = &p;
  if (ref == nullptr || most == ref || ref->stepsPerS() <= 0) return "";
  const double speedup = most->stepsPerS() / ref->stepsPerS();
  // The load per server is its bytes (its slices hold equal numbers of floats); update counts are
  // per slice, and a server may lead more, smaller slices than another.
  const auto [low, high] = std::minmax_element(most->serverBytes.begin(), most->serverBytes.end());
  const std::string balance =
      most->serverBytes.empty() || *high == 0
          ? ""
          : fmt::format(
                "; their bytes in and out differ by {:.1f}% between the busiest and the idlest server",
                100.0 * static_cast<double>(*high - *low) / static_cast<double>(*high));
  std::string text =
      fmt::format("sharding: {} servers give {:.2f}x the steps/s of {} ({:.1f} -> {:.1f}){}.\n",
                  most->servers, speedup, ref->servers, ref->stepsPerS(), most->stepsPerS(), balance);
  const int threads = most->servers + most->workers;
  if (speedup < 1.15 && m.usableCores > 0 && threads > m.usableCores)
    text += fmt::format(
        "{} gain here: the {} workers and {} servers are threads on {} cores, so more servers spread the "
        "servers' work over no more hardware{}. The single-server bottleneck lifts where the servers have "
        "cores (or hosts) of their own (tests/netns/ps_bound.sh).\n",
        speedup < 1 ? "no" : "little", most->workers, most->servers, m.usableCores,
        std::any_of(most->serverReplicated.begin(), most->serverReplicated.end(),
                    [](auto n) { return n > 0; })
            ? ", and with 2 or more servers every update is also applied by a backup, work that 1 server "
              "does "
              "not do"
            : "");
  return text;
}

nlohmann::ordered_json throughputJson(const ThroughputSettings& s, const std::vector<std::size_t>& keySizes,
                                      const std::vector<ThroughputPoint>& points, const PsMachine& m) {
  nlohmann::ordered_json j;
  j["bench"] = "ps";
  j["part"] = "throughput";
  j["machine"] = machineJson(m);
  j["mode"] = s.mode;
  j["workers"] = s.workers;
  j["replicate"] = s.replicate;
  j["floats"] = s.floats;
  j["key_sizes"] = keySizes;
  j["seconds_per_point"] = s.steps > 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(s.seconds);
  j["steps_per_worker"] = s.steps > 0 ? nlohmann::ordered_json(s.steps) : nlohmann::ordered_json();
  j["warmup_steps"] = s.warmup;
  const ThroughputPoint* ref = throughputReference(points);
  j["speedup_reference_servers"] = ref ? nlohmann::ordered_json(ref->servers) : nlohmann::ordered_json();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ThroughputPoint& p : points) {
    nlohmann::ordered_json r;
    r["servers"] = p.servers;
    r["workers"] = p.workers;
    r["steps"] = p.steps;
    r["seconds"] = p.seconds;
    r["steps_per_s"] = p.stepsPerS();
    r["bytes_pushed"] = p.bytesPushed;
    r["bytes_pulled"] = p.bytesPulled;
    r["mb_per_s"] = p.megabytesPerS();
    r["speedup"] = ref && ref->stepsPerS() > 0 ? nlohmann::ordered_json(p.stepsPerS() / ref->stepsPerS())
                                               : nlohmann::ordered_json();
    r["server_updates"] = p.serverUpdates;
    r["server_replicated"] = p.serverReplicated;
    r["server_bytes"] = p.serverBytes;
    r["clock_wait_s"] = p.clockWaitS;
    r["staleness"] = stalenessJson(p.staleness);
    rows.push_back(std::move(r));
  }
  j["rows"] = std::move(rows);
  return j;
}

void readAccuracyRecords(AccuracyRow& row, const AccuracySettings& s,
                         const std::vector<std::string>& evalLines,
                         const std::vector<std::string>& metricsLines, const std::string& evalPath) {
  try {
    std::vector<EvalPoint> points;
    for (const std::string& line : evalLines)
      if (const std::optional<EvalPoint> p = parseEvalLine(line)) points.push_back(*p);
    if (points.empty()) {
      row.error =
          "the run wrote no evaluations to " + evalPath + " (it needs a gyre train with --eval-every)";
      return;
    }
    row.tta = timeToAccuracy(points, s.target);
    row.samplesPerS = trainingSamplesPerS(row.tta, s.batch);
    row.totals = parseMetricsLines(metricsLines);
  } catch (const Error& e) {
    row.error = e.what();
    return;
  }
  row.ok = true;
}

std::string accuracySettingsText(const AccuracySettings& s, const PsMachine& m) {
  const std::string steps =
      s.maxSteps > 0 ? fmt::format("at most {} steps per epoch", s.maxSteps) : "whole epochs";
  return fmt::format(
      "machine: {} usable cores ({} online), load average {} at the start; every run has this host to itself "
      "(runs go one after another), ps modes also run {} server processes on it.\n"
      "{} on Fashion-MNIST, {} workers, global batch {}, {} epoch{} ({}), test accuracy every {} steps; "
      "target {}; straggler: {}; each run stopped after {} s.\n",
      m.usableCores, m.onlineCores, loadText(m), s.servers, s.model, s.np, s.batch, s.epochs,
      s.epochs == 1 ? "" : "s", steps, s.evalEvery, s.target,
      hasStragglerRuns(s) ? fmt::format("rank {} slowed {}x", s.stragglerRank, s.stragglerFactor) : "none",
      s.runTimeoutS);
}

std::string accuracyHeader(const AccuracySettings& s) {
  return fmt::format("{:<22} {:>10} {:>8} {:>6} {:>8} {:>9} {:>9} {:>7} {:>10} {:>20}\n", "mode",
                     fmt::format("to {}", s.target), "at step", "evals", "best acc", "final acc", "samples/s",
                     "wall s", "clock wait", "stale mean/p50/p99/max");
}

std::string accuracyRow(const AccuracyRow& r) {
  if (!r.ok) return fmt::format("{:<22} FAILED: {}\n", r.run.label(), r.error);
  const TimeToAccuracy& t = r.tta;
  const std::string to = t.reached ? fmt::format("{:.1f} s", t.timeS) : "not reached";
  const std::string step = t.reached ? std::to_string(t.step) : "-";
  const std::string wait = r.totals.hasStaleness ? fmt::format("{:.2f}s", r.totals.clockWaitS) : "-";
  const std::string stale =
      r.totals.hasStaleness ? stalenessText(summarizeStaleness(r.totals.staleness)) : "-";
  return fmt::format("{:<22} {:>10} {:>8} {:>6} {:>8.3f} {:>9.3f} {:>9.0f} {:>7.1f} {:>10} {:>20}\n",
                     r.run.label(), to, step, t.evals, t.bestAcc, t.finalAcc, r.samplesPerS, r.wallS, wait,
                     stale);
}

const AccuracyRow* accuracyWinner(const std::vector<AccuracyRow>& rows, bool straggler) {
  const AccuracyRow* best = nullptr;
  for (const AccuracyRow& r : rows) {
    if (!r.ok || r.run.straggler != straggler || r.tta.evals == 0) continue;
    if (best == nullptr || better(r, *best)) best = &r;
  }
  return best;
}

std::string winnerText(const AccuracySettings& s, const std::vector<AccuracyRow>& rows) {
  std::string text;
  for (bool straggler : {false, true}) {
    if (straggler && !hasStragglerRuns(s)) continue;
    const std::string when = straggler
                                 ? fmt::format("with rank {} slowed {}x", s.stragglerRank, s.stragglerFactor)
                                 : "without a straggler";
    const AccuracyRow* w = accuracyWinner(rows, straggler);
    if (w == nullptr) {
      text += fmt::format("winner {}: none (no run of this kind finished with an evaluation)\n", when);
      continue;
    }
    // The runner-up, for scale.
    const AccuracyRow* next = nullptr;
    for (const AccuracyRow& r : rows)
      if (&r != w && r.ok && r.run.straggler == straggler && r.tta.evals > 0 &&
          (next == nullptr || better(r, *next)))
        next = &r;
    std::string versus;
    if (next != nullptr && w->tta.reached && next->tta.reached && w->tta.timeS > 0)
      versus = fmt::format("; next {} in {:.1f} s, {:.2f}x slower", next->run.mode, next->tta.timeS,
                           next->tta.timeS / w->tta.timeS);
    else if (next != nullptr)
      versus = fmt::format("; next {}: {}", next->run.mode, outcomeText(*next, s.target));
    text += fmt::format("winner {}: {} ({}{}){}\n", when, w->run.mode, outcomeText(*w, s.target), versus,
                        w->tta.reached ? "" : " -- no mode reached the target");
  }
  return text;
}

nlohmann::ordered_json accuracyJson(const AccuracySettings& s, const std::vector<AccuracyRow>& rows,
                                    const PsMachine& m) {
  nlohmann::ordered_json j;
  j["bench"] = "ps";
  j["part"] = "accuracy";
  j["machine"] = machineJson(m);
  j["model"] = s.model;
  j["np"] = s.np;
  j["batch"] = s.batch;
  j["epochs"] = s.epochs;
  j["max_steps"] = s.maxSteps;
  j["eval_every"] = s.evalEvery;
  j["target"] = s.target;
  j["servers"] = s.servers;
  j["straggler_rank"] =
      hasStragglerRuns(s) ? nlohmann::ordered_json(s.stragglerRank) : nlohmann::ordered_json();
  j["straggler_factor"] = s.stragglerFactor;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const AccuracyRow& r : rows) {
    nlohmann::ordered_json o;
    o["mode"] = r.run.mode;
    o["straggler"] = r.run.straggler;
    o["ok"] = r.ok;
    o["error"] = r.ok ? nlohmann::ordered_json() : nlohmann::ordered_json(r.error);
    o["reached"] = r.tta.reached;
    o["time_to_target_s"] = r.tta.reached ? nlohmann::ordered_json(r.tta.timeS) : nlohmann::ordered_json();
    o["step_to_target"] = r.tta.reached ? nlohmann::ordered_json(r.tta.step) : nlohmann::ordered_json();
    o["evals"] = r.tta.evals;
    o["best_acc"] = r.tta.bestAcc;
    o["final_acc"] = r.tta.finalAcc;
    o["samples_per_s"] = r.samplesPerS;
    o["train_seconds"] = r.tta.lastTimeS;
    o["epoch_samples_per_s"] = r.totals.samplesPerS;
    o["epoch_seconds"] = r.totals.seconds;
    o["wall_s"] = r.wallS;
    o["staleness"] = r.totals.hasStaleness ? stalenessJson(r.totals.staleness) : nlohmann::ordered_json();
    o["clock_wait_s"] =
        r.totals.hasStaleness ? nlohmann::ordered_json(r.totals.clockWaitS) : nlohmann::ordered_json();
    o["run_dir"] = r.runDir;
    out.push_back(std::move(o));
  }
  j["rows"] = std::move(out);
  nlohmann::ordered_json winners;
  for (bool straggler : {false, true}) {
    const AccuracyRow* w = accuracyWinner(rows, straggler);
    winners[straggler ? "with_straggler" : "without_straggler"] =
        w ? nlohmann::ordered_json(w->run.mode) : nlohmann::ordered_json();
  }
  j["winner"] = std::move(winners);
  return j;
}

}  // namespace gyre::app
