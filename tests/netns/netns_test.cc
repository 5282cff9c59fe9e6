// Multi-host runs on one machine: network namespaces are the hosts (tests/netns/netns.sh), and
// `gyre run` reaches them through tests/netns/netns-rsh. `gyre bench collectives --check` must
// pass with one rank per host (TCP between hosts) and with two (shared memory inside a host, TCP
// across), gyre::rt's objects in shared memory must be fetched once per host, and nothing may stay
// behind in the hosts afterwards.
//
// Needs root (ip netns, veth, bridge, tc): where namespaces cannot be created, netns.sh exits 77
// and every test here is skipped with its reason. Label "netns"; the suite is bounded by the
// time-outs below, and the namespaces are removed after it, or by the next run (`netns.sh gc`)
// when the test process was killed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"

namespace gyre {
namespace {

using test::ProgramRun;
using test::ProgramSpec;

constexpr int kHosts = 3;
constexpr int kSkip = 77;
const std::string kScripts = test::sourceDir() + "/tests/netns";

ProgramRun script(const std::vector<std::string>& args,
                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
  ProgramSpec spec;
  spec.argv = {kScripts + "/netns.sh"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = test::cleanEnvironment();
  return test::runProgram(spec, timeout);
}

class NetnsHosts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefix_ = "gyn" + std::to_string(::getpid() % 100000);
    script({"gc"});  // the sets of earlier runs that were killed before their `down`
    const ProgramRun up =
        script({"up", prefix_, std::to_string(kHosts), "--owner", std::to_string(::getpid())});
    if (up.exitCode == kSkip) {
      skipReason_ = up.err;
    } else if (up.exitCode != 0) {
      setupError_ = "netns.sh up " + prefix_ + " " + up.describe();
    } else {
      ready_ = true;
    }
  }

  static void TearDownTestSuite() {
    if (!ready_) return;
    const ProgramRun down = script({"down", prefix_, std::to_string(kHosts)});
    EXPECT_EQ(down.exitCode, 0) << "netns.sh down " << prefix_ << " " << down.describe();
    ready_ = false;
  }

  void SetUp() override {
    if (!skipReason_.empty()) GTEST_SKIP() << "network namespaces are not available: " << skipReason_;
    ASSERT_TRUE(ready_) << setupError_;
  }

  static std::string host(int k) { return prefix_ + std::to_string(k); }

  // `gyre run -H h1:S,h2:S,h3:S --rsh-agent netns-rsh --network-interface gy0 -- gyre bench ...`
  static ProgramRun runBench(int slots, const std::vector<std::string>& benchArgs,
                             const std::vector<std::string>& runArgs = {}) {
    std::string hosts;
    for (int k = 1; k <= kHosts; ++k) {
      if (k > 1) hosts += ',';
      hosts += host(k);
      hosts += ':';
      hosts += std::to_string(slots);
    }
    std::vector<std::string> tool = {"bench", "collectives"};
    tool.insert(tool.end(), benchArgs.begin(), benchArgs.end());
    return runGyre(hosts, tool, runArgs);
  }

  // `gyre run -H HOSTS --rsh-agent netns-rsh --network-interface gy0 RUN_ARGS -- gyre TOOL_ARGS`
  static ProgramRun runGyre(const std::string& hosts, const std::vector<std::string>& toolArgs,
                            const std::vector<std::string>& runArgs = {}) {
    ProgramSpec spec;
    spec.argv = {test::gyreTool(), "run"};
    spec.argv.insert(spec.argv.end(), runArgs.begin(), runArgs.end());
    const std::vector<std::string> rest = {"-H",
                                           hosts,
                                           "--rsh-agent",
                                           kScripts + "/netns-rsh",
                                           "--network-interface",
                                           "gy0",
                                           "--no-tag-output",
                                           "--timeout",
                                           "240",
                                           "--",
                                           test::gyreTool()};
    spec.argv.insert(spec.argv.end(), rest.begin(), rest.end());
    spec.argv.insert(spec.argv.end(), toolArgs.begin(), toolArgs.end());
    spec.env = test::cleanEnvironment();
    return test::runProgram(spec, std::chrono::seconds(300));
  }

  // Processes still running in the namespaces.
  static std::string leftovers() {
    std::string text;
    for (int k = 1; k <= kHosts; ++k) {
      ProgramSpec spec;
      spec.argv = {"/bin/sh", "-c", "ip netns pids \"$0\" | xargs -r ps -o pid=,args= -p", host(k)};
      spec.env = test::cleanEnvironment();
      text += test::runProgram(spec, std::chrono::seconds(30)).out;
    }
    return text;
  }

  static inline std::string prefix_;
  static inline std::string skipReason_;
  static inline std::string setupError_;
  static inline bool ready_ = false;
};

struct Rows {
  int total = 0;
  int ok = 0;
  std::string header;
};

// Counts the table's rows, and those whose check column says ok.
Rows rows(const std::string& out) {
  Rows r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# gyre bench collectives:")) r.header = line;
    if (line.empty() || line[0] == '#' || line.find("time_us") != std::string::npos) continue;
    ++r.total;
    if (line.ends_with("  ok")) ++r.ok;
  }
  return r;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// 4K, 16K, 64K, 256K, 1M times auto, naive, ring, halving-doubling, tree and hierarchical.
constexpr int kRows = 5 * 6;
const std::vector<std::string> kBenchArgs = {"--algo", "all",      "--check", "--max-bytes", "1M", "--iters",
                                             "3",      "--warmup", "1",       "--timeout",   "200"};

TEST_F(NetnsHosts, OneRankPerHostOverTcp) {
  const ProgramRun r = runBench(1, kBenchArgs);
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  const Rows t = rows(r.out);
  EXPECT_NE(t.header.find("np=3 "), std::string::npos) << r.out;
  EXPECT_EQ(t.total, kRows) << r.out;
  EXPECT_EQ(t.ok, kRows) << r.out;
  EXPECT_EQ(leftovers(), "");
}

TEST_F(NetnsHosts, TwoRanksPerHostSharedMemoryInsideTcpAcross) {
  // At debug level each rank says how many of its peers it reaches over shared memory.
  const ProgramRun r = runBench(2, kBenchArgs, {"-x", "GYRE_LOG_LEVEL=debug"});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  const Rows t = rows(r.out);
  EXPECT_NE(t.header.find("np=6 "), std::string::npos) << r.out;
  EXPECT_EQ(t.total, kRows) << r.out;
  EXPECT_EQ(t.ok, kRows) << r.out;
  EXPECT_EQ(count(r.err, "connected to 5 peers (1 over shared memory)"), 6) << r.err;
  // Two ranks on each of three hosts: auto reduces inside the hosts first.
  EXPECT_GT(count(r.err, "allreduce auto: hierarchical for 4096 bytes on 3 hosts"), 0) << r.err;
  EXPECT_EQ(leftovers(), "");
}

// gyre::rt's objects in shared memory across hosts: rank 0 on the first host puts 100 MB; rank 1,
// the first reader on the second host, fetches it over the link (its host receives the 100 MB);
// rank 2, on the same host, maps rank 1's copy and receives nothing.
TEST_F(NetnsHosts, RtObjectsAreFetchedOncePerHost) {
  const ProgramRun r = runGyre(host(1) + ":1," + host(2) + ":2", {"bench", "rt", "--across-hosts", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.describe() << "\nstdout:\n" << r.out;
  std::map<std::string, double> received;  // by where
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("{")) continue;
    const auto row = nlohmann::json::parse(line);
    if (row["received_mb"].is_number()) received[row["where"].get<std::string>()] = row["received_mb"].get<double>();
    EXPECT_GT(row["per_s"].get<double>(), 0) << line;
  }
  ASSERT_EQ(received.size(), 2u) << r.out;
  EXPECT_GE(received["rank 1, another host, fetched"], 104.8) << r.out;  // 100 MiB and the headers
  EXPECT_LT(received["rank 2, another host, its copy"], 1.0) << r.out;
  EXPECT_EQ(leftovers(), "");
}

}  // namespace
}  // namespace gyre
