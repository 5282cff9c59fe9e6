#include "tune/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/files.h"
#include "plot/svg_chart.h"
#include "tune/status_view.h"

namespace gyre::tune {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kHighlighted = 5;
const char* const kGrey = "#b8b8b8";

// The trials by best metric, best first (those without one last).
std::vector<const Trial*> ranked(const ExperimentState& state, double sign) {
  std::vector<const Trial*> order;
  for (const Trial& t : state.trials) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [&](const Trial* a, const Trial* b) {
    return score(a->best(sign), sign) > score(b->best(sign), sign);
  });
  return order;
}

plot::Chart curves(const ExperimentSpec& spec, const ExperimentState& state, bool againstTime) {
  plot::Chart c;
  c.title = fmt::format("{} of every trial", spec.metric);
  c.xLabel = againstTime ? "seconds since the experiment started"
                         : (spec.builtin ? "iteration (epoch)" : "iteration");
  c.yLabel = spec.metric;
  const std::vector<const Trial*> order = ranked(state, spec.sign());
  // Grey first, so the highlighted trials are drawn over them.
  for (std::size_t pass = 0; pass < 2; ++pass)
    for (std::size_t i = 0; i < order.size(); ++i) {
      const bool highlighted = i < kHighlighted && !std::isnan(order[i]->best(spec.sign()));
      if (highlighted != (pass == 1)) continue;
      plot::Series s;
      for (const Result& r : order[i]->results) {
        s.x.push_back(againstTime ? r.time : r.iteration);
        s.y.push_back(r.metric);
      }
      s.points = s.x.size() < 30;
      if (highlighted) {
        s.label = fmt::format("trial {} ({})", order[i]->id, describeConfig(spec.space, order[i]->config));
        if (s.label.size() > 34) s.label = s.label.substr(0, 32) + "..)";
        s.color = plot::paletteColor(i);
        s.width = 2.2;
      } else {
        s.color = kGrey;
        s.opacity = 0.7;
      }
      c.series.push_back(std::move(s));
    }
  return c;
}

plot::Chart search(const ExperimentSpec& spec, const ExperimentState& state, const Param& p) {
  plot::Chart c;
  c.title = fmt::format("best {} against {}", spec.metric, p.name);
  c.xLabel = p.name + (p.distribution == Distribution::kLogUniform ? " (log scale)" : "");
  c.yLabel = fmt::format("best {}", spec.metric);
  c.logX = p.distribution == Distribution::kLogUniform;
  plot::Series full, early;
  full.label = "trained to the end";
  early.label = "stopped early";
  full.line = early.line = false;
  full.points = early.points = true;
  full.color = plot::paletteColor(0);
  early.color = kGrey;
  for (const Trial& t : state.trials) {
    if (!t.config.contains(p.name) || !t.config.at(p.name).is_number()) continue;
    plot::Series& s = t.stoppedEarly ? early : full;
    s.x.push_back(t.config.at(p.name).get<double>());
    s.y.push_back(t.best(spec.sign()));
  }
  c.series = {early, full};
  return c;
}

std::string table(const ExperimentSpec& spec, const ExperimentState& state) {
  std::string h = "<table>\n<tr><th>trial</th><th>status</th>";
  for (const Param& p : spec.space.params) h += "<th>" + plot::escapeXml(p.name) + "</th>";
  h += fmt::format(
      "<th>iterations</th><th>last {0}</th><th>best {0}</th><th>worker-iterations</th><th>notes</th></tr>\n",
      plot::escapeXml(spec.metric));
  for (const Trial* t : ranked(state, spec.sign())) {
    h += fmt::format("<tr><td>{}</td><td>{}</td>", t->id, statusName(t->status));
    for (const Param& p : spec.space.params)
      h += "<td>" + (t->config.contains(p.name) ? plot::escapeXml(formatValue(t->config.at(p.name))) : "") +
           "</td>";
    std::string notes = t->stoppedEarly ? "stopped early" : "";
    for (const Exploit& e : t->lineage)
      notes += fmt::format("{}took trial {} at {}", notes.empty() ? "" : "; ", e.source, e.iteration);
    if (!t->error.empty()) notes += (notes.empty() ? "" : "; ") + t->error;
    auto number = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.4f}", v); };
    h += fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{:g}</td><td>{}</td></tr>\n", t->iteration(),
                     number(t->last()), number(t->best(spec.sign())), t->workerIterations,
                     plot::escapeXml(notes));
  }
  return h + "</table>\n";
}

}  // namespace

std::string writePlots(const ExperimentFiles& files, const ExperimentSpec& spec,
                       const ExperimentState& state) {
  const fs::path dir(files.dir());
  std::vector<std::pair<std::string, std::string>> plots = {
      {"curves.svg", plot::svg(curves(spec, state, false))},
      {"curves-time.svg", plot::svg(curves(spec, state, true))}};
  for (const Param& p : spec.space.params)
    if (p.numeric()) plots.emplace_back("search-" + p.name + ".svg", plot::svg(search(spec, state, p)));
  for (const auto& [name, text] : plots) files::writeAtomically((dir / name).string(), text);

  double compute = 0;
  for (const Trial& t : state.trials) compute += t.workerIterations;
  const std::vector<const Trial*> order = ranked(state, spec.sign());
  std::string best = "no trial reported " + plot::escapeXml(spec.metric);
  if (!order.empty() && !std::isnan(order.front()->best(spec.sign())))
    best = fmt::format("best: trial {}, {} {:.4f} ({})", order.front()->id, plot::escapeXml(spec.metric),
                       order.front()->best(spec.sign()),
                       plot::escapeXml(describeConfig(spec.space, order.front()->config)));
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gyre tune: {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f3f3f3}}"
      "figure{{margin:1em 0}}</style></head><body>\n<h1>gyre tune: {0}</h1>\n"
      "<p>{1} trials, {2} {3}; {4:g} worker-iterations of compute.</p>\n<p><b>{5}</b></p>\n",
      plot::escapeXml(dir.filename().string()), state.trials.size(),
      spec.mode == "max" ? "maximizing" : "minimizing", plot::escapeXml(spec.metric), compute, best);
  for (const auto& [name, text] : plots) html += "<figure>" + text + "</figure>\n";
  html += "<h2>Trials</h2>\n" + table(spec, state) + "</body></html>\n";
  const std::string index = (dir / "index.html").string();
  files::writeAtomically(index, html);
  return index;
}

}  // namespace gyre::tune
