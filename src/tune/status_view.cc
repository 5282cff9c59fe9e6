#include "tune/status_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/numbers.h"

namespace gyre::tune {
namespace {

std::string shortNumber(const Json& v) {
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return formatValue(v);
}

std::string metricText(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.4f}", v);
}

std::string clock(double s) {
  const auto total = static_cast<long>(s);
  return fmt::format("{:02}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

int countLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

std::string describeConfig(const Space& space, const Json& config) {
  std::string s;
  for (const Param& p : space.params)
    if (config.contains(p.name))
      s += fmt::format("{}{}={}", s.empty() ? "" : ", ", p.name, shortNumber(config.at(p.name)));
  return s;
}

std::string statusTable(const ExperimentSpec& spec, const ExperimentState& state, double elapsedS,
                        const std::string& where, std::size_t maxRows) {
  const double sign = spec.sign();
  int counts[5] = {0, 0, 0, 0, 0};
  double compute = 0;
  const Trial* best = nullptr;
  for (const Trial& t : state.trials) {
    ++counts[static_cast<int>(t.status)];
    compute += t.workerIterations;
    if (!std::isnan(t.best(sign)) && (best == nullptr || sign * t.best(sign) > sign * best->best(sign)))
      best = &t;
  }
  std::string s = fmt::format(
      "== gyre tune: {} trials | RUNNING {} | PAUSED {} | TERMINATED {} | ERROR {} | {} | {} | compute {} "
      "worker-iterations ==\n",
      state.planned > 0 ? fmt::format("{} of {}", state.trials.size(), state.planned)
                        : std::to_string(state.trials.size()),
      counts[1], counts[2], counts[3], counts[4], clock(elapsedS), where, numbers::format(compute));
  if (best != nullptr)
    s += fmt::format("best so far: trial {} {} {} ({})\n", best->id, spec.metric,
                     metricText(best->best(sign)), describeConfig(spec.space, best->config));
  // Running trials first, then by best metric.
  std::vector<const Trial*> rows;
  for (const Trial& t : state.trials) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [&](const Trial* a, const Trial* b) {
    const bool ra = a->status == TrialStatus::kRunning, rb = b->status == TrialStatus::kRunning;
    if (ra != rb) return ra;
    return score(a->best(sign), sign) > score(b->best(sign), sign);
  });
  if (rows.empty()) return s;
  std::vector<std::string> header = {"trial", "status"};
  for (const Param& p : spec.space.params) header.push_back(p.name);
  for (const char* h : {"iter", "last", "best", "node"}) header.push_back(h);
  std::vector<std::vector<std::string>> table = {header};
  for (std::size_t i = 0; i < rows.size() && i < maxRows; ++i) {
    const Trial& t = *rows[i];
    std::vector<std::string> row = {std::to_string(t.id), statusName(t.status)};
    for (const Param& p : spec.space.params)
      row.push_back(t.config.contains(p.name) ? shortNumber(t.config.at(p.name)) : "");
    row.push_back(std::to_string(t.iteration()));
    row.push_back(metricText(t.last()));
    row.push_back(metricText(t.best(sign)));
    row.push_back(t.node.empty() ? "-" : t.node);
    table.push_back(row);
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : table) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) line += fmt::format("{:<{}}  ", row[c], width[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  }
  if (rows.size() > maxRows) s += fmt::format("... and {} more (trials.csv)\n", rows.size() - maxRows);
  return s;
}

void StatusView::event(const std::string& line) {
  if (!live_) {
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
    return;
  }
  recent_.push_back(line);
  while (recent_.size() > 5) recent_.pop_front();
}

void StatusView::draw(const ExperimentState& state, double elapsedS, const std::string& where, bool force) {
  const double interval = live_ ? 0.5 : 30.0;
  if (!force && elapsedS - lastDraw_ < interval) return;
  lastDraw_ = elapsedS;
  std::string text = statusTable(spec_, state, elapsedS, where, live_ ? 20 : 1000);
  if (live_) {
    for (const std::string& e : recent_) text += e + "\n";
    // Back over what was drawn last time, then clear to the end of the screen.
    if (drawnLines_ > 0) fmt::print(out_, "\x1b[{}F\x1b[J", drawnLines_);
    drawnLines_ = countLines(text);
  }
  fmt::print(out_, "{}", text);
  std::fflush(out_);
}

void StatusView::finish(const ExperimentState& state, double elapsedS, const std::string& where) {
  if (live_ && drawnLines_ > 0) fmt::print(out_, "\x1b[{}F\x1b[J", drawnLines_);
  drawnLines_ = 0;
  fmt::print(out_, "{}", statusTable(spec_, state, elapsedS, where, 1000));
  std::fflush(out_);
}

}  // namespace gyre::tune
