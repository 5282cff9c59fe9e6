// --straggler-cpu: the straggler slowed by the kernel, not by a sleep. Its process runs in a
// cgroup of its own under a CPU quota: it says so, the other worker sees it as a straggler (so the
// quota did slow it), and the cgroup is gone after the run. Skipped, saying why, where this
// process may not make a cgroup (not root, or no cgroup cpu controller).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.h"
#include "support/jobs.h"
#include "support/programs.h"

namespace gyre::train {
namespace {

std::string whyNoCgroups() {
  if (::geteuid() != 0) return "not root: cannot make a cgroup";
  if (!std::filesystem::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") &&
      !std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers"))
    return "no cgroup cpu controller on this machine";
  return "";
}

TEST(StragglerCpu, TheStragglerRunsUnderACpuQuotaAndItsCgroupGoesAfter) {
  if (!cli::haveData()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (const std::string why = whyNoCgroups(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir dir;
  const test::ProgramRun r =
      cli::gyreTrain({"--model", "mlp", "--np", "2", "--max-steps", "40", "--no-eval", "--straggler-rank", "1",
                      "--straggler-cpu", "0.2", "--run-dir", dir.path()});
  ASSERT_EQ(r.exitCode, 0) << r.describe();
  const std::string said = "gyre train: rank 1 (the straggler) runs on 0.2 core(s): a CPU quota in cgroup ";
  const auto at = r.out.find(said);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string cgroup = r.out.substr(at + said.size(), r.out.find('\n', at) - at - said.size());
  EXPECT_NE(cgroup.find("gyre-straggler-"), std::string::npos) << cgroup;
  EXPECT_FALSE(std::filesystem::exists(cgroup)) << cgroup << " was left behind";
  const std::vector<nlohmann::json> metrics = cli::jsonLines(dir.path() + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  ASSERT_EQ(metrics[0].at("stragglers").size(), 1u) << metrics[0].dump();
  EXPECT_EQ(metrics[0].at("stragglers")[0].at("rank"), 1);
  EXPECT_GT(metrics[0].at("stragglers")[0].at("factor").get<double>(), 1.5);
}

}  // namespace
}  // namespace gyre::train
