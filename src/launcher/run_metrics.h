// `gyre run --metrics-port P`: the launcher's view of its job for Prometheus (GET /metrics on P):
//   gyre_run_workers                         gauge: workers running now
//   gyre_run_worker_exits_total{outcome}     counter: workers that exited, ok or failed (a
//                                            non-zero code or a signal)
//   gyre_run_generation                      gauge: the generation (--max-restarts) or, elastic,
//                                            the membership
//   gyre_run_restarts_total                  counter: generations started again, or elastic
//                                            workers started after the first (replacements, additions)
//   gyre_run_membership_size                 gauge: elastic: the workers of the newest membership
// Parameter servers (--servers S) serve their own on P + 1 + index (GYRE_PS_METRICS_PORT_BASE).
// One per process, since one gyre run supervises one job; thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace gyre::launcher {

class RunMetrics {
 public:
  static RunMetrics& get();

  void generationStarted(int generation);
  // Whatever its agents reported, no worker of an ended generation runs.
  void generationEnded() { running_ = 0; }
  void workerStarted() { ++running_; }
  void workerExited(bool failed);
  void replacementStarted() { ++restarts_; }
  void membership(std::uint64_t number, int size);

  std::string render() const;

 private:
  std::atomic<int> running_{0};
  std::atomic<std::uint64_t> exitsOk_{0}, exitsFailed_{0};
  std::atomic<std::uint64_t> generation_{0}, restarts_{0};
  std::atomic<int> membershipSize_{-1};  // < 0: not elastic
};

}  // namespace gyre::launcher
