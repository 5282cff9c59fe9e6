// `gyre run --rdzv etcd://.../JOB --elastic` against a real etcd (tests/etcd/etcd.sh): two nodes
// (two gyre runs, as two hosts would run) train one job and the last one deletes its keys; the
// job survives the loss of its leader node and of an etcd member at once; an etcd that cannot
// be reached and wrong flags are clear errors. Workers are gyre_elastic_counter, whose sum
// equals its steps only when every step counted exactly once.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "elastic/membership.h"
#include "rendezvous/etcd_client.h"
#include "support/etcd_cluster.h"
#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using test::contains;
using test::ProgramRun;

constexpr auto kRdzvTimeout = std::chrono::seconds(180);

class RdzvRun : public ::testing::Test {
 protected:
  void start(int members) {
    cluster_ = std::make_unique<test::EtcdCluster>(members);
    if (!cluster_->skipReason().empty()) GTEST_SKIP() << cluster_->skipReason();
    ASSERT_TRUE(cluster_->failure().empty()) << cluster_->failure();
  }

  // One node of job `job`: `gyre run --rdzv ... -np 1 --min-np 1 --max-np 2` of the counter.
  // `mark` goes into its --output-dir, so that the test can find the node's process.
  test::ProgramSpec node(const std::string& job, const std::string& mark, int steps) const {
    return {{test::gyreTool(),
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
             dir_.path() + "/" + mark,
             "--",
             test::binDir() + "/gyre_elastic_counter",
             std::to_string(steps),
             "--step-ms",
             "20",
             "--commit-every",
             "5"},
            test::cleanEnvironment()};
  }

  rendezvous::EtcdClient client() const {
    return rendezvous::EtcdClient(rendezvous::parseEtcdUrl(cluster_->url("x")).endpoints,
                                  std::chrono::seconds(10));
  }

  // Waits (at most a minute) until job `job` has published a membership of `size` workers.
  bool waitForMembership(const std::string& job, std::size_t size) const {
    const auto store = connectEtcdStore(cluster_->url(job), std::chrono::seconds(10));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      const auto m = elastic::latestMembership(*store);
      if (m && m->members.size() == size) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  test::TempDir dir_;
  std::unique_ptr<test::EtcdCluster> cluster_;
};

TEST_F(RdzvRun, TwoNodesTrainOneJobAndItsKeysAreDeletedAtTheEnd) {
  start(1);
  const std::vector<ProgramRun> runs =
      test::runPrograms({node("job", "a", 150), node("job", "b", 150)}, kRdzvTimeout);
  int leaders = 0;
  for (const ProgramRun& run : runs) {
    EXPECT_FALSE(run.timedOut);
    EXPECT_EQ(run.exitCode, 0) << run.describe();
    leaders += contains(run.err, "leads the job") ? 1 : 0;
  }
  EXPECT_EQ(leaders, 1) << runs[0].err << runs[1].err;
  const std::string logs =
      test::readFile(dir_.path() + "/a/rank.0.log") + test::readFile(dir_.path() + "/b/rank.0.log") +
      test::readFile(dir_.path() + "/a/rank.1.log") + test::readFile(dir_.path() + "/b/rank.1.log");
  EXPECT_TRUE(contains(logs, "rank 0 of 2") && contains(logs, "rank 1 of 2")) << logs;
  EXPECT_TRUE(contains(logs, "done at step 150, sum 150.000000")) << logs;
  EXPECT_EQ(client().list("/job/").size(), 0u);
}

TEST_F(RdzvRun, TheJobSurvivesItsLeaderNodeAndAnEtcdMemberKilledTogether) {
  start(3);
  auto a = test::startProgram(node("job", "a", 300), kRdzvTimeout);
  // A leads (it starts alone); then B joins, and both train.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!client().get("/job/launch/leader") && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto b = test::startProgram(node("job", "b", 300), kRdzvTimeout);
  ASSERT_TRUE(waitForMembership("job", 2));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::vector<std::string> nodeA = test::processesWith(dir_.path() + "/a");
  ASSERT_EQ(nodeA.size(), 1u);
  ::kill(std::stoi(nodeA[0]), SIGKILL);
  cluster_->kill(0);
  const ProgramRun ra = a.get();
  const ProgramRun rb = b.get();
  EXPECT_EQ(ra.signal, SIGKILL);
  EXPECT_FALSE(rb.timedOut);
  ASSERT_EQ(rb.exitCode, 0) << rb.describe();
  EXPECT_TRUE(contains(rb.err, "takes over as the job's leader")) << rb.err;
  EXPECT_TRUE(contains(rb.err, "(its etcd lease expired)")) << rb.err;
  // B's worker went on alone, from its last commit, and counted every step once.
  const std::string log = test::readFile(dir_.path() + "/b/rank.1.log");
  EXPECT_TRUE(contains(log, "rank 0 of 1")) << log;
  EXPECT_TRUE(contains(log, "done at step 300, sum 300.000000")) << log;
  EXPECT_EQ(test::processesWith(dir_.path() + "/a").size(), 0u);
  // (ElasticRun's tests, which ctest -j2 may run meanwhile, count to 300 at another --step-ms.)
  EXPECT_EQ(test::processesWith("gyre_elastic_counter 300 --step-ms 20").size(), 0u);
}

TEST_F(RdzvRun, CtrlCOnTheLastNodeEndsTheJobAndTheNextRunStartsAfresh) {
  start(1);
  auto run = test::startProgram(node("job", "a", 100000), kRdzvTimeout);
  ASSERT_TRUE(waitForMembership("job", 1));
  const std::vector<std::string> nodeA = test::processesWith(dir_.path() + "/a");
  ASSERT_EQ(nodeA.size(), 1u);
  ::kill(std::stoi(nodeA[0]), SIGINT);
  const ProgramRun stopped = run.get();
  EXPECT_EQ(stopped.exitCode, 130) << stopped.describe();
  EXPECT_TRUE(contains(stopped.err, "interrupted by SIGINT")) << stopped.err;
  EXPECT_EQ(test::processesWith("gyre_elastic_counter 100000").size(), 0u);
  // The job under this path ended: a new one starts there from nothing.
  const ProgramRun again = test::runProgram(node("job", "b", 20), kRdzvTimeout);
  EXPECT_EQ(again.exitCode, 0) << again.describe();
  EXPECT_TRUE(contains(test::readFile(dir_.path() + "/b/rank.0.log"), "done at step 20, sum 20.000000"));
  EXPECT_EQ(client().list("/job/").size(), 0u);
}

TEST(RdzvRunErrors, GyreRdzvLeavesJobsWithoutElasticAlone) {
  test::Environment env = test::cleanEnvironment();
  env["GYRE_RDZV"] = "etcd://127.0.0.1:1/job";
  const ProgramRun run =
      test::runProgram({{test::gyreTool(), "run", "-np", "1", "--", "true"}, env}, kRdzvTimeout);
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  const ProgramRun elastic = test::runProgram({{test::gyreTool(), "run", "--elastic", "--min-np", "1",
                                                "--max-np", "1", "--start-timeout", "1", "--", "true"},
                                               env},
                                              kRdzvTimeout);
  EXPECT_EQ(elastic.exitCode, 1) << elastic.describe();  // it names the unreachable etcd
  EXPECT_TRUE(contains(elastic.err, "--rdzv etcd://127.0.0.1:1/job: cannot reach etcd")) << elastic.err;
}

TEST(RdzvRunErrors, AnEtcdThatCannotBeReachedIsAClearErrorWithinTheStartTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const ProgramRun run =
      test::runProgram({{test::gyreTool(), "run", "--rdzv", "etcd://127.0.0.1:1/job", "--elastic", "--min-np",
                         "1", "--max-np", "1", "--start-timeout", "2", "--", "true"},
                        test::cleanEnvironment()},
                       kRdzvTimeout);
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_TRUE(
      contains(run.err, "--rdzv etcd://127.0.0.1:1/job: cannot reach etcd within 2000 ms (127.0.0.1:1: "))
      << run.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RdzvRunErrors, WrongFlagsExit2NamingTheProblem) {
  const auto gyreRun = [](std::vector<std::string> args) {
    args.insert(args.begin(), {test::gyreTool(), "run"});
    args.insert(args.end(), {"--", "true"});
    return test::runProgram({args, test::cleanEnvironment()}, kRdzvTimeout);
  };
  ProgramRun r = gyreRun({"--rdzv", "etcd://127.0.0.1:1/job"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "--rdzv needs --elastic")) << r.err;
  r = gyreRun({"--rdzv", "etcd://127.0.0.1:1", "--elastic", "--min-np", "1", "--max-np", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "name the job in the address's path")) << r.err;
  r = gyreRun(
      {"--rdzv", "etcd://127.0.0.1:1/job", "--elastic", "--min-np", "1", "--max-np", "2", "-H", "a:1"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "--rdzv starts workers on this host only")) << r.err;
  r = gyreRun({"--rdzv", "http://127.0.0.1:1/job", "--elastic", "--min-np", "1", "--max-np", "2"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_TRUE(contains(r.err, "an etcd address starts with etcd://")) << r.err;
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
