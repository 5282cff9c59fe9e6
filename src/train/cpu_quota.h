// --straggler-cpu: a worker made slow the way a slower or busier machine is, by the kernel: its
// process confined to a fraction of a core by a CPU quota (CFS bandwidth) in a cgroup of its own,
// instead of sleeping (a sleep hands its core to the other workers, so on a machine with fewer
// cores than workers it barely costs the job anything). cgroup v2 (cpu.max) or v1's cpu
// controller (cpu.cfs_quota_us); needs the right to make a cgroup (root, as in CI).
#pragma once

#include <memory>
#include <string>

namespace gyre::train {

class CpuQuota {
 public:
  // Moves this process (every thread) into a new cgroup allowed `cores` cores (0.01 to 64): that
  // share of each period of a few milliseconds. Throws gyre::Error naming the file and why when it cannot.
  static std::unique_ptr<CpuQuota> confine(double cores);
  // Moves the process back where it was and removes the cgroup.
  ~CpuQuota();
  CpuQuota(const CpuQuota&) = delete;
  CpuQuota& operator=(const CpuQuota&) = delete;

  const std::string& path() const { return dir_; }

 private:
  CpuQuota(std::string dir, std::string parent) : dir_(std::move(dir)), parent_(std::move(parent)) {}
  std::string dir_;     // the cgroup made for this process
  std::string parent_;  // the cgroup.procs it came from
};

}  // namespace gyre::train
