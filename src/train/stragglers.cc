#include "train/stragglers.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <utility>

#include "common/check.h"

namespace gyre::train {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

std::string format(const char* pattern, double value) {
  char text[32];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

StragglerMonitor::StragglerMonitor(double threshold) : threshold_(threshold) {
  GYRE_ARG_CHECK(threshold > 1, "the straggler threshold must be above 1 (got ", threshold, ")");
}

std::vector<std::string> StragglerMonitor::observe(std::int64_t step, const std::vector<double>& times) {
  std::vector<std::string> lines;
  if (times.size() < 2) return lines;
  if (ranks_.size() != times.size()) {  // a new world (elastic): start over
    ranks_.assign(times.size(), Rank{});
    current_.clear();
  }
  for (std::size_t r = 0; r < times.size(); ++r) {
    std::vector<double> others;
    for (std::size_t o = 0; o < times.size(); ++o)
      if (o != r) others.push_back(times[o]);
    const double typical = median(others);
    const double ratio = typical > 0 ? times[r] / typical : 1;
    Rank& rank = ranks_[r];
    rank.slow.push_back(ratio > threshold_);
    rank.ratios.push_back(ratio);
    if (static_cast<int>(rank.slow.size()) > kWindow) {
      rank.slow.pop_front();
      rank.ratios.pop_front();
    }
    const int slow = static_cast<int>(std::count(rank.slow.begin(), rank.slow.end(), true));
    const double factor = median(std::vector<double>(rank.ratios.begin(), rank.ratios.end()));
    const int id = static_cast<int>(r);
    const auto entry =
        std::find_if(current_.begin(), current_.end(), [&](const Straggler& s) { return s.rank == id; });
    if (!rank.straggler && slow >= kNamedAt) {
      rank.straggler = true;
      current_.push_back({id, step, factor});
      lines.push_back("straggler: rank " + std::to_string(id) + " is " + format("%.1f", factor) +
                      "x as slow as the others (ready after " + format("%.1f", times[r] * 1e3) +
                      " ms, they after " + format("%.1f", typical * 1e3) + " ms) in " + std::to_string(slow) +
                      " of the last " + std::to_string(rank.slow.size()) + " steps, at step " +
                      std::to_string(step));
    } else if (rank.straggler && slow <= kClearedAt) {
      rank.straggler = false;
      if (entry != current_.end()) current_.erase(entry);
      lines.push_back("straggler: rank " + std::to_string(id) + " keeps pace again at step " +
                      std::to_string(step));
    } else if (rank.straggler && entry != current_.end()) {
      entry->factor = factor;
    }
  }
  for (const Straggler& s : current_) {
    const auto it =
        std::find_if(seen_.begin(), seen_.end(), [&](const Straggler& x) { return x.rank == s.rank; });
    if (it == seen_.end())
      seen_.push_back(s);
    else
      *it = s;
  }
  return lines;
}

std::vector<Straggler> StragglerMonitor::takeSeen() {
  std::vector<Straggler> out;
  out.swap(seen_);
  seen_ = current_;
  return out;
}

BackupWorkers::BackupWorkers(int backups, double threshold, int world)
    : backups_(backups),
      threshold_(threshold),
      measured_(static_cast<std::size_t>(world)),
      skippedInARow_(static_cast<std::size_t>(world), 0) {
  GYRE_ARG_CHECK(backups > 0 && backups < world, "backup workers must be at least 1 and fewer than the ",
                 world, " workers (got ", backups, ")");
  GYRE_ARG_CHECK(threshold > 1, "the straggler threshold must be above 1 (got ", threshold, ")");
}

bool BackupWorkers::skips(int rank) const {
  return std::binary_search(skipping_.begin(), skipping_.end(), rank);
}

double BackupWorkers::recent(int rank) const {
  const auto& m = measured_[static_cast<std::size_t>(rank)];
  return median(std::vector<double>(m.begin(), m.end()));
}

void BackupWorkers::observe(const std::vector<double>& times) {
  const int world = static_cast<int>(measured_.size());
  GYRE_ARG_CHECK(times.size() == measured_.size(), "step times of ", times.size(), " ranks for ", world,
                 " workers");
  dropped_ += static_cast<std::int64_t>(skipping_.size());
  for (int r = 0; r < world; ++r) {
    auto& m = measured_[static_cast<std::size_t>(r)];
    if (skips(r)) continue;
    m.push_back(times[static_cast<std::size_t>(r)]);
    if (m.size() > kRecent) m.pop_front();
  }
  skipping_.clear();
  if (++observed_ < kFirstStep) return;
  std::vector<double> recentTimes(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) recentTimes[static_cast<std::size_t>(r)] = recent(r);
  std::vector<int> byTime(static_cast<std::size_t>(world));
  std::iota(byTime.begin(), byTime.end(), 0);
  std::stable_sort(byTime.begin(), byTime.end(), [&](int a, int b) {
    return recentTimes[static_cast<std::size_t>(a)] > recentTimes[static_cast<std::size_t>(b)];
  });
  for (int k = 0; k < backups_; ++k) {
    const int r = byTime[static_cast<std::size_t>(k)];
    std::vector<double> others;
    for (int o = 0; o < world; ++o)
      if (o != r) others.push_back(recentTimes[static_cast<std::size_t>(o)]);
    if (recentTimes[static_cast<std::size_t>(r)] <= threshold_ * median(others)) break;
    if (skippedInARow_[static_cast<std::size_t>(r)] >= kProbeEvery - 1) continue;  // computes: measured again
    skipping_.push_back(r);
  }
  std::sort(skipping_.begin(), skipping_.end());
  for (int r = 0; r < world; ++r) {
    int& row = skippedInARow_[static_cast<std::size_t>(r)];
    row = skips(r) ? row + 1 : 0;
  }
}

std::int64_t BackupWorkers::takeDropped() {
  return std::exchange(dropped_, 0);
}

}  // namespace gyre::train
