// issue 23's etcd target, on the built-in trainer: an elastic job of two nodes (two `gyre run
// --rdzv`, as two hosts would run) in a three-member etcd; the node that started it and one etcd
// member are killed mid-training. The job finishes on the other node with every step trained
// exactly once (steps.jsonl; progress.jsonl shows the rollback to the last commit) and a test
// accuracy within 0.5 points of the same job undisturbed.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "elastic/membership.h"
#include "rendezvous/etcd_client.h"
#include "support/etcd_cluster.h"
#include "support/processes.h"

namespace gyre::train::cli {
namespace {

constexpr int kSteps = 300;
constexpr int kCommitEvery = 10;
constexpr auto kRdzvTimeout = std::chrono::seconds(300);

class RdzvTrain : public TrainerTest {
 protected:
  void SetUp() override {
    TrainerTest::SetUp();
    if (IsSkipped()) return;
    if (!haveData()) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
    cluster_ = std::make_unique<test::EtcdCluster>(3);
    if (!cluster_->skipReason().empty()) GTEST_SKIP() << cluster_->skipReason();
    ASSERT_TRUE(cluster_->failure().empty()) << cluster_->failure();
  }

  // One node of job `job`, its run directory `job`, its --output-dir `job`-`mark`.
  test::ProgramSpec node(const std::string& job, const std::string& mark) const {
    return {{gyreTool(),
             "run",
             "--rdzv",
             cluster_->url(job),
             "--elastic",
             "-np",
             "1",
             "--min-np",
             "1",
             "--max-np",
             "2",
             "--output-dir",
             path(job + "-" + mark),
             "--",
             trainWorker(),
             "--model",
             "mlp",
             "--max-steps",
             std::to_string(kSteps),
             "--commit-every",
             std::to_string(kCommitEvery),
             "--threads",
             "1",
             "--progress",
             "off",
             "--run-dir",
             path(job)},
            test::cleanEnvironment()};
  }

  bool waitFor(const std::function<bool()>& done) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  // The newest step progress.jsonl logged; 0 before the first.
  int lastStep(const std::string& job) const {
    int step = 0;
    for (const nlohmann::json& j : jsonLines(path(job) + "/progress.jsonl"))
      if (j.contains("step")) step = j["step"].get<int>();
    return step;
  }

  double accuracy(const std::string& job) const {
    const auto metrics = jsonLines(path(job) + "/metrics.jsonl");
    return metrics.empty() ? -1 : metrics.back().value("test_accuracy", -1.0);
  }

  std::unique_ptr<test::EtcdCluster> cluster_;
};

TEST_F(RdzvTrain, TheJobSurvivesItsFirstNodeAndAnEtcdMemberWithEveryStepTrainedOnce) {
  // Undisturbed: both nodes from the start to the end.
  for (const test::ProgramRun& run : test::runPrograms({node("calm", "a"), node("calm", "b")}, kRdzvTimeout))
    ASSERT_EQ(run.exitCode, 0) << run.describe();
  const double calm = accuracy("calm");
  ASSERT_GT(calm, 0.5);

  rendezvous::EtcdClient etcd(rendezvous::parseEtcdUrl(cluster_->url("x")).endpoints,
                              std::chrono::seconds(10));
  auto a = test::startProgram(node("storm", "a"), kRdzvTimeout);
  ASSERT_TRUE(waitFor([&] { return etcd.get("/storm/launch/leader").has_value(); }));
  auto b = test::startProgram(node("storm", "b"), kRdzvTimeout);
  // Mid-training, with both nodes' workers in the job: past step 100 of 300.
  const auto store = connectEtcdStore(cluster_->url("storm"), std::chrono::seconds(10));
  ASSERT_TRUE(waitFor([&] {
    const auto m = elastic::latestMembership(*store);
    return m && m->members.size() == 2;
  }));
  ASSERT_TRUE(waitFor([&] { return lastStep("storm") >= 100; }));
  const std::vector<std::string> first = test::processesWith(path("storm-a"));
  ASSERT_EQ(first.size(), 1u);
  ::kill(std::stoi(first[0]), SIGKILL);
  cluster_->kill(0);
  const int killedAt = lastStep("storm");
  EXPECT_EQ(a.get().signal, SIGKILL);
  const test::ProgramRun survivor = b.get();
  ASSERT_EQ(survivor.exitCode, 0) << survivor.describe();
  EXPECT_TRUE(contains(survivor.err, "takes over as the job's leader")) << survivor.err;

  // Every step exactly once in what was trained ...
  std::vector<int> steps;
  for (const nlohmann::json& j : jsonLines(path("storm") + "/steps.jsonl"))
    steps.push_back(j["step"].get<int>());
  std::vector<int> want(kSteps);
  for (int i = 0; i < kSteps; ++i) want[i] = i + 1;
  EXPECT_EQ(steps, want);
  // ... and the story of it: membership 1 from step 0 (alone at first, when the second node's
  // worker came late), and last the survivor's, from the last commit before the kill.
  std::vector<std::pair<int, int>> starts;  // membership, start step
  for (const nlohmann::json& j : jsonLines(path("storm") + "/progress.jsonl"))
    if (j.contains("start_step")) starts.emplace_back(j["generation"].get<int>(), j["start_step"].get<int>());
  ASSERT_GE(starts.size(), 2u);
  EXPECT_EQ(starts.front(), std::make_pair(1, 0));
  const int resumed = starts.back().second;
  EXPECT_LE(resumed, killedAt);
  EXPECT_GT(resumed, killedAt - 2 * kCommitEvery);
  EXPECT_EQ(resumed % kCommitEvery, 0);
  const double storm = accuracy("storm");
  std::printf(
      "test accuracy: undisturbed %.2f%%, leader node and an etcd member killed at step %d: %.2f%% "
      "(resumed from step %d)\n",
      calm * 100, killedAt, storm * 100, starts[1].second);
  EXPECT_NEAR(storm, calm, 0.005);
  EXPECT_EQ(etcd.list("/storm/").size(), 0u);
}

}  // namespace
}  // namespace gyre::train::cli
