#include "report/figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "plot/svg_chart.h"
#include "report/scaling.h"

namespace gyre::report {
namespace {

using plot::BarChart;
using plot::BarStack;
using plot::Chart;
using plot::HeatMap;
using plot::Series;

Chart chart(std::string title, std::string x, std::string y, bool log = false) {
  Chart c;
  c.title = std::move(title);
  c.xLabel = std::move(x);
  c.yLabel = std::move(y);
  c.logX = c.logY = log;
  return c;
}

Series series(std::string label, bool points = false) {
  Series s;
  s.label = std::move(label);
  s.points = points;
  return s;
}

Series reference(std::string label, std::string color) {
  Series s = series(std::move(label));
  s.color = std::move(color);
  s.dashed = true;
  return s;
}

BarChart bars(std::string title, std::string x, std::string y, bool stacked = false) {
  BarChart c;
  c.title = std::move(title);
  c.xLabel = std::move(x);
  c.yLabel = std::move(y);
  c.stacked = stacked;
  return c;
}

BarStack stack(std::string label, std::vector<double> values = {}) {
  BarStack s;
  s.label = std::move(label);
  s.values = std::move(values);
  return s;
}

std::string label(const Run& r) {
  return fmt::format("{} ({} worker{})", r.name, r.world, r.world == 1 ? "" : "s");
}

std::string slug(const std::string& text) {
  std::string s;
  for (char c : text) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (std::isalnum(static_cast<unsigned char>(l))) {
      s += l;
    } else if (!s.empty() && s.back() != '-') {
      s += '-';
    }
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "run" : s;
}

// Loss against steps and against seconds (from the first step's time, so restarts show as gaps).
void lossFigures(const std::vector<Run>& runs, std::vector<Figure>& out) {
  Chart bySteps = chart("Training loss", "step", "loss (running mean)");
  Chart bySeconds = chart("Training loss against time", "seconds", "loss (running mean)");
  for (const Run& r : runs) {
    if (r.stepNumbers.empty()) continue;
    const std::size_t window = std::max<std::size_t>(1, r.stepNumbers.size() / 50);
    const std::vector<double> mean = movingMean(r.stepLosses, window);
    Series s = series(label(r));
    for (std::size_t i = 0; i < r.stepNumbers.size(); ++i) {
      s.x.push_back(static_cast<double>(r.stepNumbers[i]));
      s.y.push_back(mean[i]);
    }
    bySteps.series.push_back(s);
    if (r.stepTimes.empty()) continue;
    std::map<std::int64_t, double> when;
    for (const StepTime& t : r.stepTimes) when[t.step] = t.time;
    const double start = r.stepTimes.front().time;
    Series t = series(label(r));
    for (std::size_t i = 0; i < r.stepNumbers.size(); ++i) {
      const auto it = when.find(r.stepNumbers[i]);
      if (it == when.end()) continue;
      t.x.push_back(it->second - start);
      t.y.push_back(mean[i]);
    }
    if (!t.x.empty()) bySeconds.series.push_back(t);
  }
  if (!bySteps.series.empty())
    out.push_back({"loss-steps", bySteps.title,
                   "steps.jsonl: each step's loss (the mean over the workers), as a running mean over a "
                   "fiftieth of the run.",
                   plot::svg(bySteps)});
  if (!bySeconds.series.empty())
    out.push_back(
        {"loss-seconds", bySeconds.title,
         "The same losses against the seconds since the run's first step (progress.jsonl's times); time "
         "lost to a restart shows as a gap.",
         plot::svg(bySeconds)});
}

void accuracyFigures(const std::vector<Run>& runs, std::vector<Figure>& out) {
  Chart bySteps = chart("Test accuracy", "step", "test accuracy (%)");
  Chart bySeconds = chart("Test accuracy against training time", "seconds of training", "test accuracy (%)");
  for (const Run& r : runs) {
    Series s = series(label(r), true), t = series(label(r), true);
    double steps = 0, seconds = 0;
    for (const Epoch& e : r.epochs) {
      steps += static_cast<double>(e.steps);
      seconds += e.seconds;
      if (!e.testAccuracy) continue;
      s.x.push_back(steps);
      s.y.push_back(*e.testAccuracy * 100);
      t.x.push_back(seconds);
      t.y.push_back(*e.testAccuracy * 100);
    }
    if (s.x.empty()) continue;
    bySteps.series.push_back(s);
    bySeconds.series.push_back(t);
  }
  if (bySteps.series.empty()) return;
  out.push_back({"accuracy-steps", bySteps.title,
                 "metrics.jsonl: the test accuracy at the end of each epoch.", plot::svg(bySteps)});
  out.push_back({"accuracy-seconds", bySeconds.title,
                 "The same against the epochs' training seconds added up (evaluation and start-up left out).",
                 plot::svg(bySeconds)});
}

void throughputFigures(const std::vector<Run>& runs, std::vector<Figure>& out) {
  BarChart throughput = bars("Throughput", "run", "samples/s");
  BarStack perRun = stack("samples/s, mean over epochs");
  BarChart split = bars("Where a step's time goes", "run", "ms per step", true);
  BarStack data = stack("waiting for data"), compute = stack("compute"),
           wait = stack("communication not hidden");
  std::vector<std::pair<int, double>> throughputs;
  for (const Run& r : runs) {
    if (r.epochs.empty()) continue;
    double sum = 0, steps = 0, dataS = 0, computeS = 0, waitS = 0;
    for (const Epoch& e : r.epochs) {
      sum += e.samplesPerS;
      steps += static_cast<double>(e.timedSteps);
      dataS += e.dataWaitS;
      computeS += e.computeS - e.dataWaitS;
      waitS += e.waitS;
    }
    const double mean = sum / static_cast<double>(r.epochs.size());
    throughput.categories.push_back(label(r));
    perRun.values.push_back(mean);
    throughputs.emplace_back(r.world, mean);
    split.categories.push_back(label(r));
    const double perStep = steps > 0 ? 1e3 / steps : 0;
    data.values.push_back(dataS * perStep);
    compute.values.push_back(computeS * perStep);
    wait.values.push_back(waitS * perStep);
  }
  if (throughput.categories.empty()) return;
  throughput.stacks.push_back(perRun);
  out.push_back({"throughput", throughput.title,
                 "metrics.jsonl: training samples per second, the mean over the epochs.",
                 plot::svg(throughput)});
  split.stacks = {data, compute, wait};
  out.push_back(
      {"step-split", split.title,
       "A step's time on rank 0 (compute_s + wait_s over the timed steps): waiting for the next batch, the "
       "forward and backward passes and the update, and the wait for the gradients' allreduce that "
       "compute did not hide.",
       plot::svg(split)});

  std::set<int> sizes;
  for (const auto& [w, t] : throughputs) sizes.insert(w);
  const auto s = sizes.size() > 1 ? scaling(throughputs) : std::nullopt;
  if (!s) return;
  const int most = s->points.back().workers;
  Chart speedup = chart("Speedup", "workers", "speedup S(W)");
  Chart efficiency = chart("Scaling efficiency", "workers", "efficiency E(W) = S(W) / W");
  Series sp = series("measured", true), ef = series("measured", true);
  Series idealS = reference("ideal", "#888"), idealE = idealS;
  for (const ScalingPoint& p : s->points) {
    sp.x.push_back(p.workers);
    sp.y.push_back(p.speedup);
    ef.x.push_back(p.workers);
    ef.y.push_back(p.efficiency);
  }
  idealS.x = {1.0, static_cast<double>(most)};
  idealS.y = idealS.x;
  idealE.x = idealS.x;
  idealE.y = {1.0, 1.0};
  speedup.series = {sp, idealS};
  efficiency.series = {ef, idealE};
  std::string fit;
  if (s->serialFraction) {
    const double f = *s->serialFraction;
    Series a = reference(fmt::format("Amdahl, serial {:.1f}%", f * 100), "#e15759");
    Series ae = a;
    for (int w = 1; w <= most; ++w) {
      a.x.push_back(w);
      a.y.push_back(amdahl(f, w));
      ae.x.push_back(w);
      ae.y.push_back(amdahl(f, w) / w);
    }
    speedup.series.push_back(a);
    efficiency.series.push_back(ae);
    fit = fmt::format(
        " Amdahl's law fitted to the speedups gives a serial fraction of {:.1f}%: at most {:.1f}x "
        "however many workers.",
        f * 100, f > 0 ? 1 / f : std::numeric_limits<double>::infinity());
  }
  out.push_back(
      {"speedup", speedup.title,
       "Throughput at W workers over throughput at 1 (the best run of each size), with the ideal line." + fit,
       plot::svg(speedup)});
  out.push_back(
      {"efficiency", efficiency.title, "Speedup over workers: 1 is perfect scaling.", plot::svg(efficiency)});
}

// Per-rank step times: rows are ranks, columns steps (averaged into at most 240 columns).
void stragglerFigures(const std::vector<Run>& runs, std::vector<Figure>& out) {
  for (const Run& r : runs) {
    std::size_t ranks = 0;
    for (const StepTime& t : r.stepTimes) ranks = std::max(ranks, t.rankMs.size());
    if (ranks < 2) continue;
    const std::size_t n = r.stepTimes.size(), columns = std::min<std::size_t>(n, 240);
    HeatMap map;
    map.title = "Step time by rank: " + r.name;
    map.xLabel = "step";
    map.yLabel = "rank";
    map.unit = "ms";
    map.values.assign(ranks, std::vector<double>(columns, 0));
    std::vector<std::vector<int>> counts(ranks, std::vector<int>(columns, 0));
    for (std::size_t r2 = 0; r2 < ranks; ++r2) map.rows.push_back(std::to_string(r2));
    map.columns.assign(columns, 0);
    std::vector<int> columnCount(columns, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = i * columns / n;
      map.columns[c] += static_cast<double>(r.stepTimes[i].step);
      ++columnCount[c];
      for (std::size_t k = 0; k < r.stepTimes[i].rankMs.size(); ++k) {
        map.values[k][c] += r.stepTimes[i].rankMs[k];
        ++counts[k][c];
      }
    }
    for (std::size_t c = 0; c < columns; ++c) {
      map.columns[c] /= std::max(1, columnCount[c]);
      for (std::size_t k = 0; k < ranks; ++k)
        map.values[k][c] = counts[k][c] > 0 ? map.values[k][c] / counts[k][c] : std::nan("");
    }
    out.push_back(
        {"ranks-" + slug(r.name), map.title,
         "progress.jsonl's rank_ms: each rank's time from the end of its previous step to its gradients "
         "being ready, darker is slower; a straggler is a dark row.",
         plot::svg(map)});
  }
}

void stalenessFigures(const std::vector<Run>& runs, std::vector<Figure>& out) {
  for (const Run& r : runs) {
    std::vector<double> total;
    for (const Epoch& e : r.epochs) {
      if (!e.staleness) continue;
      if (total.size() < e.staleness->size()) total.resize(e.staleness->size(), 0);
      for (std::size_t k = 0; k < e.staleness->size(); ++k)
        total[k] += static_cast<double>((*e.staleness)[k]);
    }
    while (!total.empty() && total.back() == 0) total.pop_back();
    if (total.empty()) continue;
    BarChart histogram =
        bars("Staleness: " + r.name, "staleness (updates by others between pull and push)", "updates");
    for (std::size_t k = 0; k < total.size(); ++k) histogram.categories.push_back(std::to_string(k));
    histogram.stacks.push_back(stack(r.mode, total));
    out.push_back(
        {"staleness-" + slug(r.name), histogram.title,
         "metrics.jsonl's staleness histogram over every epoch (parameter-server modes; the last bar also "
         "holds larger values).",
         plot::svg(histogram)});
  }
}

void benchFigure(const std::vector<BenchSeries>& bench, std::vector<Figure>& out) {
  if (bench.empty()) return;
  Chart c = chart("Collectives: bus bandwidth", "message bytes", "busbw (GB/s)", true);
  bool peer = false;
  for (std::size_t i = 0; i < bench.size(); ++i) {
    Series s = series("gyre " + bench[i].label, true);
    s.color = plot::paletteColor(i);
    Series m = reference("OpenMPI " + bench[i].label, plot::paletteColor(i));
    for (const BenchPoint& p : bench[i].points) {
      s.x.push_back(p.bytes);
      s.y.push_back(p.busbw);
      if (!p.peerBusbw) continue;
      m.x.push_back(p.bytes);
      m.y.push_back(*p.peerBusbw);
    }
    c.series.push_back(s);
    if (!m.x.empty()) {
      c.series.push_back(m);
      peer = true;
    }
  }
  out.push_back(
      {"busbw", c.title,
       std::string("gyre bench collectives --json: bus bandwidth against message size (nccl-tests' units)") +
           (peer ? "; dashed, OpenMPI's own collective in the same run (--baseline mpi)." : "."),
       plot::svg(c)});
}

}  // namespace

std::vector<double> movingMean(const std::vector<double>& values, std::size_t window) {
  std::vector<double> out(values.size());
  double sum = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) {
      sum += values[i];
      ++count;
    }
    if (i >= window && std::isfinite(values[i - window])) {
      sum -= values[i - window];
      --count;
    }
    out[i] = count > 0 ? sum / static_cast<double>(count) : std::nan("");
  }
  return out;
}

std::vector<Figure> figures(const std::vector<Run>& runs, const std::vector<BenchSeries>& bench) {
  std::vector<Figure> out;
  lossFigures(runs, out);
  accuracyFigures(runs, out);
  throughputFigures(runs, out);
  stragglerFigures(runs, out);
  stalenessFigures(runs, out);
  benchFigure(bench, out);
  return out;
}

}  // namespace gyre::report
