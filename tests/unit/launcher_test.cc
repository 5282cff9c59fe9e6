// The launcher's pieces that need no processes: host lists and placement, the agent protocol,
// command-line quoting, line splitting of relayed output, thread counts and the output sink.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "gyre/errors.h"
#include "launcher/agent.h"
#include "launcher/agent_protocol.h"
#include "launcher/hosts.h"
#include "launcher/line_reader.h"
#include "launcher/output.h"
#include "launcher/slurm_allocation.h"
#include "support/ranks.h"

namespace gyre::launcher {
namespace {

TEST(Hosts, ParsesHostListsWithAndWithoutSlots) {
  const auto hosts = parseHostList("a:2,b, c:3,[::1]:4,fe80::1");
  ASSERT_EQ(hosts.size(), 5u);
  EXPECT_EQ(hosts[0].name, "a");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "b");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].name, "c");
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_EQ(hosts[3].name, "::1");
  EXPECT_EQ(hosts[3].slots, 4);
  EXPECT_EQ(hosts[4].name, "fe80::1");
  EXPECT_EQ(hosts[4].slots, 1);
  EXPECT_THROW(parseHostList("a:0"), InvalidArgument);
  EXPECT_THROW(parseHostList("a:x"), InvalidArgument);
  EXPECT_THROW(parseHostList("a,,b"), InvalidArgument);
  EXPECT_THROW(parseHostList("a;rm -rf:1"), InvalidArgument);
}

TEST(Hosts, ParsesHostfilesInOpenMpiAndHorovodForms) {
  const auto hosts =
      parseHostfile("# cluster\nnode1 slots=4\nnode2:2  # two\n\n  node3\nnode4 3\n", "hosts.txt");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].name, "node3");
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_EQ(hosts[3].slots, 3);
  try {
    parseHostfile("node1\nnode2:2 slots=3\n", "hosts.txt");
    FAIL() << "slots given twice";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("hosts.txt:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseHostfile("# nothing\n", "empty"), InvalidArgument);
}

TEST(Hosts, PlacesRanksInHostOrderFillingSlots) {
  const auto p = placeRanks({{"a", 2}, {"b", 3}, {"c", 1}}, 4);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].host, "a");
  EXPECT_EQ(p[0].firstRank, 0);
  EXPECT_EQ(p[0].count, 2);
  EXPECT_EQ(p[1].host, "b");
  EXPECT_EQ(p[1].firstRank, 2);
  EXPECT_EQ(p[1].count, 2);
  EXPECT_EQ(placeRanks({{"a", 2}, {"b", 3}}, 0).back().count, 3);  // every slot
  EXPECT_TRUE(placeRanks({{"localhost", 1}}, 1)[0].local);
  EXPECT_FALSE(placeRanks({{"elsewhere.example", 1}}, 1)[0].local);
  EXPECT_THROW(placeRanks({{"a", 2}}, 3), InvalidArgument);
  EXPECT_THROW(placeRanks({{"a", 1}, {"a", 1}}, 2), InvalidArgument);
}

// gyre run inside sbatch or salloc: the allocation's nodes, each with its tasks as slots.
TEST(SlurmAllocation, ReadsTheNodesAndTheirTasks) {
  using Env = std::map<std::string, std::string>;
  EXPECT_FALSE(slurmAllocation(Env{}).has_value());
  EXPECT_FALSE(slurmAllocation(Env{{"SLURM_JOB_ID", "7"}}).has_value());
  const auto a = slurmAllocation(Env{
      {"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[01-03],gpu5"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->jobId, "7");
  ASSERT_EQ(a->nodes.size(), 4u);
  EXPECT_EQ(a->nodes[0].name, "n01");
  EXPECT_EQ(a->nodes[2].name, "n03");
  EXPECT_EQ(a->nodes[2].slots, 2);
  EXPECT_EQ(a->nodes[3].name, "gpu5");
  EXPECT_EQ(a->nodes[3].slots, 1);
  // Older Slurm's SLURM_JOBID; no task list: one slot a node.
  const auto b = slurmAllocation(Env{{"SLURM_JOBID", "8"}, {"SLURM_JOB_NODELIST", "a,b"}});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->nodes[1].slots, 1);
  try {
    slurmAllocation(
        Env{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "2(x3)"}});
    ADD_FAILURE() << "a task list longer than the nodes was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "SLURM_TASKS_PER_NODE='2(x3)' gives 3 nodes but SLURM_JOB_NODELIST='a,b' has 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(slurmAllocation(Env{{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[3-1]"}}),
               InvalidArgument);
  EXPECT_EQ(srunAgentCommand().front(), "srun");
}

TEST(AgentProtocol, SpecRoundTrips) {
  AgentSpec s;
  s.host = "node2";
  s.jobId = "gyre-abc";
  s.secret = "s3cr3t";
  s.storeCandidates = {"10.0.0.1:1234", "[fd00::1]:1234"};
  s.worldSize = 8;
  s.firstRank = 4;
  s.count = 4;
  s.program = {"./train", "--lr", "0.1 0.2"};
  s.env = {{"GYRE_LOG_LEVEL", "debug"}, {"X", "a=b"}};
  s.threads = 3;
  s.startTimeoutMs = 1500;
  s.interface = "eth0";
  s.stopGraceMs = 250;
  const AgentSpec d = decodeSpec(encodeSpec(s));
  EXPECT_EQ(d.host, s.host);
  EXPECT_EQ(d.secret, s.secret);
  EXPECT_EQ(d.storeCandidates, s.storeCandidates);
  EXPECT_EQ(d.firstRank, 4);
  EXPECT_EQ(d.program, s.program);
  EXPECT_EQ(d.env, s.env);
  EXPECT_EQ(d.threads, 3);
  EXPECT_EQ(d.interface, "eth0");
  EXPECT_EQ(d.stopGraceMs, 250);
  EXPECT_THROW(decodeSpec("{}"), ProtocolError);
  EXPECT_THROW(decodeSpec("not json"), ProtocolError);
  s.firstRank = 6;  // ranks 6..9 in a world of 8
  EXPECT_THROW(decodeSpec(encodeSpec(s)), ProtocolError);
}

TEST(AgentProtocol, EventsRoundTrip) {
  Event out;
  out.kind = Event::Kind::kOutput;
  out.rank = 3;
  out.fromStderr = true;
  out.terminator = '\r';
  out.text = " 42% [====   ] loss 0.31 ";
  Event d = decodeEvent(encodeEvent(out));
  EXPECT_EQ(d.kind, Event::Kind::kOutput);
  EXPECT_EQ(d.rank, 3);
  EXPECT_TRUE(d.fromStderr);
  EXPECT_EQ(d.terminator, '\r');
  EXPECT_EQ(d.text, out.text);

  Event exit;
  exit.kind = Event::Kind::kExit;
  exit.rank = 1;
  exit.code = -1;
  exit.signal = 9;
  exit.elapsedMs = 1234;
  d = decodeEvent(encodeEvent(exit));
  EXPECT_EQ(d.code, -1);
  EXPECT_EQ(d.signal, 9);
  EXPECT_EQ(d.elapsedMs, 1234);

  Event failed;
  failed.kind = Event::Kind::kFailed;
  failed.text = "host b: cannot reach";
  EXPECT_EQ(decodeEvent(encodeEvent(failed)).text, failed.text);
  EXPECT_THROW(decodeEvent("X 1 2"), ProtocolError);
  EXPECT_THROW(decodeEvent("S 1 2 3"), ProtocolError);
  EXPECT_THROW(decodeEvent("Q"), ProtocolError);
  EXPECT_THROW(decodeEvent(""), ProtocolError);
}

TEST(AgentProtocol, QuotesAndSplitsCommandLines) {
  EXPECT_EQ(shellQuote("/usr/bin/gyre"), "/usr/bin/gyre");
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(shellQuote(""), "''");
  EXPECT_EQ(shellQuote("a b"), "'a b'");
  EXPECT_EQ(splitCommandLine("ssh -p 2222 -o 'BatchMode yes' \"x\\\"y\" z\\ w"),
            (std::vector<std::string>{"ssh", "-p", "2222", "-o", "BatchMode yes", "x\"y", "z w"}));
  EXPECT_EQ(splitCommandLine("  "), std::vector<std::string>{});
  EXPECT_THROW(splitCommandLine("ssh 'open"), InvalidArgument);
}

std::vector<std::pair<std::string, char>> readAll(const std::string& bytes, bool splitOnReturn,
                                                  std::size_t maxLine) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  EXPECT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[1]);
  LineReader reader(splitOnReturn, maxLine);
  std::vector<std::pair<std::string, char>> lines;
  while (reader.readFrom(fds[0], [&](const std::string& t, char end) { lines.emplace_back(t, end); })) {
  }
  close(fds[0]);
  return lines;
}

TEST(LineReader, SplitsOnNewlinesReturnsAndLength) {
  using L = std::vector<std::pair<std::string, char>>;
  EXPECT_EQ(readAll("a\n\nb\rc", false, 100), (L{{"a", '\n'}, {"", '\n'}, {"b\rc", '\0'}}));
  EXPECT_EQ(readAll("10%\r20%\rdone\n", true, 100), (L{{"10%", '\r'}, {"20%", '\r'}, {"done", '\n'}}));
  EXPECT_EQ(readAll("abcdefg\nhi", false, 3), (L{{"abc", '\0'}, {"def", '\0'}, {"g", '\n'}, {"hi", '\0'}}));
  EXPECT_EQ(readAll("abcdef\n", false, 3), (L{{"abc", '\0'}, {"def", '\n'}}));
  EXPECT_EQ(readAll("", false, 3), L{});
}

TEST(ThreadEnvironment, DividesCoresAndKeepsWhatTheUserSet) {
  auto none = [](const std::string&) { return false; };
  EXPECT_EQ(threadEnvironment(0, 16, 4, none).threads, 4);
  EXPECT_EQ(threadEnvironment(0, 2, 4, none).threads, 1);
  EXPECT_EQ(threadEnvironment(3, 2, 4, none).threads, 3);
  const ThreadEnv t = threadEnvironment(0, 8, 2, [](const std::string& n) { return n == "OMP_NUM_THREADS"; });
  EXPECT_EQ(t.env, (std::vector<std::pair<std::string, std::string>>{
                       {"GYRE_NUM_THREADS", "4"}, {"MKL_NUM_THREADS", "4"}, {"OPENBLAS_NUM_THREADS", "4"}}));
}

TEST(OutputSink, KeepsTheLastLinesAndWritesOneLogPerRank) {
  test::TempDir dir;
  {
    OutputSink sink(2, false, dir.path() + "/logs", 2);
    testing::internal::CaptureStdout();
    sink.line(1, false, "one", '\n');
    sink.line(1, false, "two", '\n');
    sink.line(1, false, "thr", '\0');
    sink.line(1, false, "ee", '\n');
    sink.line(1, false, "partial", '\0');
    sink.flush();
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "one\ntwo\nthree\npartial");
    EXPECT_EQ(sink.tail(1), (std::vector<std::string>{"two", "three", "partial"}));
    EXPECT_EQ(sink.tail(0), std::vector<std::string>{});
    EXPECT_EQ(sink.logPath(1), dir.path() + "/logs/rank.1.log");
  }
  std::ifstream log(dir.path() + "/logs/rank.1.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str(), "one\ntwo\nthree\npartial");
}

}  // namespace
}  // namespace gyre::launcher
