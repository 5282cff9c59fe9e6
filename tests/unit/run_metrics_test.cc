// gyre run's figures for Prometheus (launcher/run_metrics.h) through a job's life: workers start
// and exit, a failed generation is started again, an elastic job publishes memberships.
#include "launcher/run_metrics.h"

#include <gtest/gtest.h>

namespace gyre::launcher {
namespace {

TEST(RunMetrics, FollowsWorkersGenerationsAndMemberships) {
  RunMetrics m;
  m.generationStarted(0);
  m.workerStarted();
  m.workerStarted();
  m.workerExited(true);
  m.workerExited(false);
  m.generationStarted(1);
  m.workerStarted();
  std::string text = m.render();
  EXPECT_NE(text.find("gyre_run_workers 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_worker_exits_total{outcome=\"ok\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_worker_exits_total{outcome=\"failed\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_generation 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_restarts_total 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("gyre_run_membership_size"), std::string::npos) << "not an elastic job";
  m.membership(3, 4);
  m.replacementStarted();
  text = m.render();
  EXPECT_NE(text.find("gyre_run_generation 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_membership_size 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gyre_run_restarts_total 2\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace gyre::launcher
