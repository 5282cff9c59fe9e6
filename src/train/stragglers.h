// Names the ranks that are persistently slower than the others, from every step's ready times
// (DistributedOptimizer::stepTimes(): from the end of a rank's previous step to its gradients
// being ready). A rank is slow in a step when its time is above `threshold` times the median of
// the other ranks' times; it becomes a straggler when it was slow in at least 8 of the last 10
// steps, and stops being one when it was slow in at most 2 of the last 10. Libtorch-free.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace gyre::train {

struct Straggler {
  int rank = 0;
  std::int64_t since = 0;  // the step at which it was named
  double factor = 0;       // its time over the others' median, the median over the window
};

class StragglerMonitor {
 public:
  static constexpr int kWindow = 10;
  static constexpr int kNamedAt = 8;    // slow steps in the window that name a rank
  static constexpr int kClearedAt = 2;  // slow steps in the window at or below which it is cleared

  // threshold > 1 (1.5: half again as slow as the others).
  explicit StragglerMonitor(double threshold);

  // One step's times, by rank (the same on every rank: it reaches the same verdicts). Returns
  // the lines to show, one per rank that became or stopped being a straggler at this step.
  std::vector<std::string> observe(std::int64_t step, const std::vector<double>& times);

  // The stragglers now.
  const std::vector<Straggler>& current() const { return current_; }
  // Every rank that was a straggler at some point since the last call (with its latest figures),
  // for the epoch's record; forgets them, keeping the current ones for the next.
  std::vector<Straggler> takeSeen();

 private:
  struct Rank {
    std::deque<bool> slow;      // the last kWindow steps
    std::deque<double> ratios;  // its time over the others' median, the same steps
    bool straggler = false;
  };
  double threshold_;
  std::vector<Rank> ranks_;
  std::vector<Straggler> current_;
  std::vector<Straggler> seen_;
};

}  // namespace gyre::train
