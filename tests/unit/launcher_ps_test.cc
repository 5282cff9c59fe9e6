// `gyre run --servers S` without processes: refusals, where the servers go, how their agents are
// described, how a lost server is reported and how their output is tagged. The whole job runs in
// tests/process/ps_run_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "gyre/errors.h"
#include "launcher/agent_protocol.h"
#include "launcher/job.h"
#include "launcher/output.h"
#include "launcher/ps_servers.h"
#include "support/ranks.h"

namespace gyre::launcher {
namespace {

std::string refusal(const RunOptions& o) {
  try {
    runJob(o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(LauncherServers, RefusesNegativeCountsAndElasticJobs) {
  RunOptions o;
  o.program = {"/bin/true"};
  o.servers = -1;
  EXPECT_EQ(refusal(o), "--servers must be an integer in [0, 1048576] (0: no parameter servers); got -1");
  o.servers = 2;
  o.elastic = true;
  o.minNp = 1;
  o.maxNp = 2;
  EXPECT_NE(refusal(o).find("--servers does not work with --elastic yet"), std::string::npos);
}

TEST(LauncherServers, PlacesServersRoundRobinOverTheWorkersHosts) {
  EXPECT_TRUE(placeServers({{"localhost", true, 0, 4}}, 0).empty());
  const auto one = placeServers({{"localhost", true, 0, 4}}, 3);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].local);
  EXPECT_EQ(one[0].indices, (std::vector<int>{0, 1, 2}));

  const std::vector<HostPlacement> hosts = {{"a", false, 0, 2}, {"b", false, 2, 2}, {"c", false, 4, 1}};
  const auto four = placeServers(hosts, 4);
  ASSERT_EQ(four.size(), 3u);
  EXPECT_EQ(four[0].host, "a");
  EXPECT_EQ(four[0].indices, (std::vector<int>{0, 3}));  // server 0's backup, 1, is on b
  EXPECT_EQ(four[1].indices, (std::vector<int>{1}));
  EXPECT_EQ(four[2].indices, (std::vector<int>{2}));
  const auto single = placeServers(hosts, 1);  // hosts without a server get no agent
  ASSERT_EQ(single.size(), 1u);
  EXPECT_EQ(single[0].host, "a");
  EXPECT_THROW(placeServers({}, 1), InvalidArgument);
}

TEST(LauncherServers, ServerHostsPlaceServersApartFromTheWorkers) {
  const std::vector<HostPlacement> workers = {{"w1", false, 0, 1}, {"w2", false, 1, 1}};
  const auto four = placeServers(workers, 4, {"s1", "s2", "s3"});
  ASSERT_EQ(four.size(), 3u);
  EXPECT_EQ(four[0].host, "s1");
  EXPECT_FALSE(four[0].local);
  EXPECT_EQ(four[0].indices, (std::vector<int>{0, 3}));
  EXPECT_EQ(four[1].host, "s2");
  EXPECT_EQ(four[1].indices, (std::vector<int>{1}));
  EXPECT_EQ(four[2].host, "s3");
  EXPECT_EQ(four[2].indices, (std::vector<int>{2}));

  const auto one = placeServers(workers, 1, {"s1", "s2", "s3", "s4"});  // unused hosts get no agent
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].host, "s1");
  EXPECT_EQ(one[0].indices, (std::vector<int>{0}));

  const auto here = placeServers(workers, 2, {"localhost"});  // a local server host runs here
  ASSERT_EQ(here.size(), 1u);
  EXPECT_TRUE(here[0].local);
  EXPECT_EQ(here[0].indices, (std::vector<int>{0, 1}));

  EXPECT_EQ(placeServers({}, 2, {"s1", "s2"}).size(), 2u);  // no worker host needed
  EXPECT_TRUE(placeServers(workers, 0, {"s1"}).empty());
  EXPECT_THROW(placeServers(workers, 2, {"s1", "s1"}), InvalidArgument);
  EXPECT_THROW(placeServers(workers, 2, {"s1", ""}), InvalidArgument);
}

TEST(LauncherServers, ServerHostsAreRefusedWithoutServersAndWhenRepeated) {
  RunOptions o;
  o.program = {"/bin/true"};
  o.serverHosts = {"s1"};
  EXPECT_EQ(refusal(o), "--server-hosts needs --servers S: it says where the S parameter servers run");
  o.servers = 2;
  o.serverHosts = {"s1", "s2", "s1"};
  EXPECT_NE(refusal(o).find("--server-hosts: s1 is given twice"), std::string::npos);
  o.serverHosts = {"s1", ""};
  EXPECT_NE(refusal(o).find("--server-hosts: host 2 of the list is empty"), std::string::npos);
}

TEST(LauncherServers, AServerAgentsSpecRoundTripsAndIsChecked) {
  AgentSpec s;
  s.host = "b";
  s.jobId = "gyre-abc";
  s.secret = "s3cr3t";
  s.storeCandidates = {"10.0.0.1:1234"};
  s.program = {"gyre", "ps-server"};
  s.worldSize = 4;
  s.count = 2;
  s.psServers = 4;
  s.serverIndices = {1, 3};
  const AgentSpec d = decodeSpec(encodeSpec(s));
  EXPECT_EQ(d.psServers, 4);
  EXPECT_EQ(d.serverIndices, (std::vector<int>{1, 3}));

  AgentSpec workers = s;  // a worker agent of a job with servers: no indices
  workers.serverIndices.clear();
  EXPECT_EQ(decodeSpec(encodeSpec(workers)).psServers, 4);
  EXPECT_TRUE(decodeSpec(encodeSpec(workers)).serverIndices.empty());

  s.serverIndices = {1, 4};  // not below psServers
  EXPECT_THROW(decodeSpec(encodeSpec(s)), ProtocolError);
  s.serverIndices = {1};  // count disagrees
  EXPECT_THROW(decodeSpec(encodeSpec(s)), ProtocolError);
}

TEST(LauncherServers, ALostServerIsOneLineNamingItsBackup) {
  ServerState state;
  state.host = "localhost";
  state.pid = 4242;
  EXPECT_EQ(
      serverLostLine(1, 3, state, "was killed by SIGKILL (Killed) after 3.1 s"),
      "ps server 1 (pid 4242) on host localhost was killed by SIGKILL (Killed) after 3.1 s; workers fail "
      "over to its backup, ps server 2");
  EXPECT_EQ(
      serverLostLine(2, 3, state, "exited with code 1"),
      "ps server 2 (pid 4242) on host localhost exited with code 1; workers fail over to its backup, ps "
      "server 0");
  state.pid = 0;  // never reported started
  EXPECT_EQ(
      serverLostLine(0, 1, state, "exited with code 2"),
      "ps server 0 on host localhost exited with code 2; it has no backup (--servers 1), so the workers "
      "cannot go on without it");
}

TEST(LauncherServers, ServerOutputIsTaggedAndLoggedApart) {
  test::TempDir dir;
  {
    OutputSink sink(2, false, dir.path() + "/logs");
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    sink.serverLine(1, true, "serving", '\n');
    sink.serverLine(0, false, "hello", '\n');
    sink.line(0, false, "worker", '\n');
    sink.flush();
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "[ps0]<stdout>:hello\nworker\n");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "[ps1]<stderr>:serving\n");
    EXPECT_EQ(sink.tail(0), std::vector<std::string>{"worker"});  // a server is not a rank
    EXPECT_EQ(sink.tail(1), std::vector<std::string>{});
  }
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_EQ(read(dir.path() + "/logs/ps.1.log"), "serving\n");
  EXPECT_EQ(read(dir.path() + "/logs/ps.0.log"), "hello\n");
  EXPECT_EQ(read(dir.path() + "/logs/rank.0.log"), "worker\n");
}

}  // namespace
}  // namespace gyre::launcher
