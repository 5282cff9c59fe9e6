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

// Backup workers (Chen et al. 2016: a synchronous step goes on with the first N - b gradients),
// decided from the shared step times rather than by a race: under an allreduce a rank whose
// gradient comes late holds every rank's next step up, so waiting for the first N - b would not
// help against a rank that is persistently slow. Instead, every step, at most `backups` ranks
// whose recent time (the median of their last kRecent measured steps) is above `threshold` times
// the median of the others' skip the next step's forward and backward: they add zeros to the
// allreduce, and the ranks that compute weigh their loss by N / (N - skipped), so the gradient
// is the average over the ranks that computed. A rank that skips computes again every
// kProbeEvery-th step, to be measured again (it rejoins once it is no longer slow). Nothing is
// skipped before kFirstStep steps have been observed (by this object: after a restart too, the
// first steps are slow and uneven). Every rank holds the same times, so every rank skips the same
// ranks. Libtorch-free.
class BackupWorkers {
 public:
  static constexpr int kRecent = 3;
  static constexpr int kProbeEvery = 10;
  static constexpr int kFirstStep = 10;

  // 0 < backups < world; threshold > 1.
  BackupWorkers(int backups, double threshold, int world);

  // Whether `rank` skips the next step's computation.
  bool skips(int rank) const;
  // How many ranks skip the next step.
  int skipping() const { return static_cast<int>(skipping_.size()); }
  // After each step: its times by rank (those of ranks that skipped it are not measurements).
  void observe(const std::vector<double>& times);
  // The gradients left out since the last call (for the epoch's record); resets the count.
  std::int64_t takeDropped();
  // A rank's recent time (the median of its last measured steps; 0: none yet).
  double recent(int rank) const;

 private:
  int backups_;
  double threshold_;
  std::vector<std::deque<double>> measured_;  // per rank, its last kRecent measured times
  std::vector<int> skippedInARow_;
  std::vector<int> skipping_;  // the ranks that skip the next step, ascending
  std::int64_t dropped_ = 0;
  int observed_ = 0;
};

}  // namespace gyre::train
