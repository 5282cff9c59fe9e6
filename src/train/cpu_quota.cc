#include "train/cpu_quota.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

namespace fs = std::filesystem;

// The quota per period: the shortest period (at least 2 ms) whose quota is the kernel's least,
// 1 ms, or more, so that a step of a few milliseconds is slowed evenly rather than run at full
// speed and then held for most of a long period.
struct Bandwidth {
  long periodUs, quotaUs;
};
Bandwidth bandwidthFor(double cores) {
  const long period = std::max(2000L, std::lround(std::ceil(1000 / cores)));
  return {period, std::max(1000L, std::lround(cores * static_cast<double>(period)))};
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text << std::flush;
  if (!out) throw Error(fmt::format("--straggler-cpu: cannot write '{}' to {}: {}", text, path, std::strerror(errno)));
}

// This process's cgroup as /proc/self/cgroup names it: v1, the line of the cpu controller; v2,
// the "0::" line.
std::string currentGroup(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (v2 && line.rfind("0::", 0) == 0) return path;
    if (!v2) {
      std::string rest = controllers + ",";
      for (std::size_t at = 0, comma; (comma = rest.find(',', at)) != std::string::npos; at = comma + 1)
        if (rest.substr(at, comma - at) == "cpu") return path;
    }
  }
  return "/";
}

}  // namespace

std::unique_ptr<CpuQuota> CpuQuota::confine(double cores) {
  if (!(cores >= 0.01 && cores <= 64)) throw InvalidArgument(fmt::format("--straggler-cpu {} is not in [0.01, 64] cores", cores));
  const Bandwidth b = bandwidthFor(cores);
  // Where the cgroup goes and the files that hold its quota: cgroup v1's cpu controller, or v2.
  std::string parent;
  std::vector<std::pair<std::string, std::string>> limits;
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", ec)) {
    parent = "/sys/fs/cgroup/cpu" + currentGroup(false);
    limits = {{"cpu.cfs_period_us", std::to_string(b.periodUs)}, {"cpu.cfs_quota_us", std::to_string(b.quotaUs)}};
  } else if (fs::exists("/sys/fs/cgroup/cgroup.controllers", ec)) {
    parent = "/sys/fs/cgroup" + currentGroup(true);
    writeFile(parent + "/cgroup.subtree_control", "+cpu");  // v2: the children of `parent` may have a quota
    limits = {{"cpu.max", fmt::format("{} {}", b.quotaUs, b.periodUs)}};
  } else {
    throw Error("--straggler-cpu: this machine has no cgroup cpu controller (neither /sys/fs/cgroup/cpu nor cgroup v2)");
  }
  const std::string dir = (fs::path(parent) / fmt::format("gyre-straggler-{}", ::getpid())).string();
  if (::mkdir(dir.c_str(), 0755) != 0)
    throw Error(fmt::format("--straggler-cpu: cannot make the cgroup {}: {}", dir, std::strerror(errno)));
  std::unique_ptr<CpuQuota> q(new CpuQuota(dir, parent + "/cgroup.procs"));  // removes it if a write fails
  for (const auto& [file, value] : limits) writeFile(dir + "/" + file, value);
  writeFile(dir + "/cgroup.procs", std::to_string(::getpid()));
  return q;
}

CpuQuota::~CpuQuota() {
  std::ofstream(parent_) << ::getpid() << std::flush;  // out of the group, then it can go
  ::rmdir(dir_.c_str());
}

}  // namespace gyre::train
