// `gyre run --max-restarts` without processes: which failure a generation is blamed on, when
// another generation starts, the lines the launcher prints about restarts, the generation in the
// agent protocol, and the output sink's restart marker.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "gyre/errors.h"
#include "launcher/agent_protocol.h"
#include "launcher/failures.h"
#include "launcher/job_store.h"
#include "launcher/output.h"
#include "support/ranks.h"

namespace gyre::launcher {
namespace {

Failure workerExit(int rank, int code) {
  Failure f{
      rank,
      "rank " + std::to_string(rank) + " on host h exited with code " + std::to_string(code) + " after 1.0 s",
      code};
  f.restartable = true;
  return f;
}

Failure workerKilled(int rank) {
  Failure f{rank, "rank " + std::to_string(rank) + " on host h was killed by SIGKILL (Killed) after 2.0 s",
            137, true};
  f.restartable = true;
  return f;
}

Failure launcherFailure(const std::string& why) {
  return Failure{-1, why};
}

GenerationOutcome failed(std::vector<Failure> failures) {
  GenerationOutcome o;
  o.failures = std::move(failures);
  return o;
}

TEST(LauncherFailures, TheRanksTheFailedWorkersTimedOutWaitingForAreNamedWhenTheyHaveNotFailed) {
  // Rank 1 stopped; rank 0 waited on rank 2, which waited on rank 1 (a ring).
  const std::map<int, std::vector<std::string>> tails = {
      {0, {"rank 0: error: allreduce(count=262144, float32, max, algo=ring): timed out waiting for rank 2 (host vm "
           "(127.0.0.1:4000), pid 7) to receive+reduce (0 of 349524 bytes done)"}},
      {2, {"something first",
           "rank 2: error: allreduce(...): timed out waiting for rank 1 (host vm (127.0.0.1:4001), pid 6) to receive "
           "(0 of 16 bytes done); rank 0 (host vm (127.0.0.1:4002), pid 5) to send (0 of 8 bytes done)"}}};
  EXPECT_EQ(unansweringRanks(tails, {workerExit(0, 2), workerExit(2, 2)}), std::vector<int>{1});
  // A rank that failed itself is named by its own failure, not here.
  EXPECT_EQ(unansweringRanks(tails, {workerExit(0, 2), workerExit(2, 2), workerKilled(1)}), std::vector<int>{});
  // Rank 0 failed first, naming both; rank 2 waited for rank 1 too, and ended (by itself, or when
  // the launcher stopped it): it answered, and only rank 1 is named.
  const std::map<int, std::vector<std::string>> first = {
      {0, {"rank 0: error: allreduce(count=262144, float32, max, algo=ring): timed out waiting for rank 2 (host vm "
           "(127.0.0.1:4000), pid 7) to receive+reduce (0 of 349524 bytes done); rank 1 (host vm (127.0.0.1:4001), "
           "pid 6) to send (0 of 349524 bytes done)"}}};
  EXPECT_EQ(unansweringRanks(first, {workerExit(0, 2)}), (std::vector<int>{1, 2}));
  EXPECT_EQ(unansweringRanks(first, {workerExit(0, 2)}, {2}), std::vector<int>{1});
  EXPECT_EQ(unansweringRanks({{0, {"rank 0: error: no such file"}}}, {workerExit(0, 1)}), std::vector<int>{});
  EXPECT_EQ(unansweringRanks({{0, {"timed out waiting for rank 0 (x)"}}}, {workerExit(0, 1)}), std::vector<int>{});
  EXPECT_EQ(unansweringRanks({{0, {"timed out waiting for rank x (y)"}}}, {workerExit(0, 1)}), std::vector<int>{});
}

TEST(Restarts, TheCauseIsAKilledWorkerThenAWorkerThenTheFirst) {
  const std::vector<Failure> mixed = {launcherFailure("agent gone"), workerExit(2, 1), workerKilled(1)};
  EXPECT_EQ(causeOf(mixed).rank, 1);
  EXPECT_TRUE(causeOf(mixed).bySignal);
  EXPECT_EQ(causeOf({launcherFailure("a"), workerExit(2, 1), workerExit(0, 4)}).rank, 2);
  EXPECT_EQ(causeOf({launcherFailure("first"), launcherFailure("second")}).message, "first");
  EXPECT_THROW(causeOf({}), Error);
}

TEST(Restarts, OnlyARestartableFailureWithRestartsLeftStartsAnotherGeneration) {
  EXPECT_TRUE(shouldRestart(failed({workerExit(1, 3)}), 0, 1));
  EXPECT_TRUE(shouldRestart(failed({workerKilled(1)}), 2, 3));
  EXPECT_FALSE(shouldRestart(failed({workerExit(1, 3)}), 1, 1));  // none left
  EXPECT_FALSE(shouldRestart(failed({workerExit(1, 3)}), 0, 0));  // --max-restarts 0: today's behaviour
  EXPECT_FALSE(shouldRestart(GenerationOutcome{}, 0, 5));         // succeeded
  EXPECT_FALSE(shouldRestart(failed({launcherFailure("cannot find the program 'x'")}), 0, 5));

  GenerationOutcome interrupted = failed({workerExit(1, 3)});
  interrupted.interrupt = 2;
  EXPECT_FALSE(shouldRestart(interrupted, 0, 5));
  GenerationOutcome timedOut = failed({workerExit(1, 3)});
  timedOut.timedOut = true;
  EXPECT_FALSE(shouldRestart(timedOut, 0, 5));
  GenerationOutcome onlyInterrupted;
  onlyInterrupted.interrupt = 15;
  EXPECT_FALSE(shouldRestart(onlyInterrupted, 0, 5));
  EXPECT_FALSE(onlyInterrupted.succeeded());

  // A lost host (its agent died after its workers started) is restartable; the cause decides.
  Failure lostHost =
      launcherFailure("host b: its agent (...) was killed by SIGKILL (Killed) while rank(s) 2 ...");
  lostHost.restartable = true;
  EXPECT_TRUE(shouldRestart(failed({lostHost}), 0, 1));
  EXPECT_FALSE(shouldRestart(failed({launcherFailure("store unreachable"), lostHost}), 0, 1));
}

TEST(Restarts, ARestartIsOneLineNamingTheCauseAndTheCount) {
  EXPECT_EQ(restartLine(failed({workerKilled(1)}), 4, 1, 3),
            "rank 1 on host h was killed by SIGKILL (Killed) after 2.0 s; restarting all 4 workers (restart "
            "1 of 3)");
  EXPECT_EQ(restartLine(failed({workerExit(0, 1), workerKilled(3)}), 1, 2, 2),
            "rank 3 on host h was killed by SIGKILL (Killed) after 2.0 s (1 other failure(s) after it); "
            "restarting all 1 worker (restart 2 of 2)");
}

TEST(Restarts, EachGenerationIsSummarizedOnOneLine) {
  EXPECT_EQ(generationSummary(0, failed({workerExit(1, 3)})),
            "generation 0: rank 1 on host h exited with code 3 after 1.0 s");
  GenerationOutcome interrupted;
  interrupted.interrupt = 2;
  EXPECT_EQ(generationSummary(2, interrupted), "generation 2: stopped by SIGINT (Interrupt)");
  GenerationOutcome failedThenInterrupted = failed({workerExit(1, 3), workerExit(0, 1)});
  failedThenInterrupted.interrupt = 2;
  EXPECT_EQ(
      generationSummary(1, failedThenInterrupted),
      "generation 1: rank 1 on host h exited with code 3 after 1.0 s (1 other failure(s) after it); then "
      "stopped by SIGINT (Interrupt)");
  GenerationOutcome timedOut;
  timedOut.timedOut = true;
  EXPECT_EQ(generationSummary(3, timedOut), "generation 3: stopped at --timeout");
  EXPECT_EQ(generationSummary(4, GenerationOutcome{}), "generation 4: every worker succeeded");
}

TEST(Restarts, TheStoryHasAHeaderAndOneLinePerGeneration) {
  EXPECT_TRUE(storyLines({failed({workerExit(1, 3)})}, 0).empty());  // no restart: nothing to tell

  const std::vector<std::string> gaveUp =
      storyLines({failed({workerExit(1, 3)}), failed({workerKilled(1)}), failed({workerExit(1, 3)})}, 2);
  ASSERT_EQ(gaveUp.size(), 4u);
  EXPECT_EQ(gaveUp[0], "giving up after 2 restarts (--max-restarts 2); what each generation did:");
  EXPECT_EQ(gaveUp[1], "  generation 0: rank 1 on host h exited with code 3 after 1.0 s");
  EXPECT_EQ(gaveUp[2], "  generation 1: rank 1 on host h was killed by SIGKILL (Killed) after 2.0 s");
  EXPECT_EQ(gaveUp[3], "  generation 2: rank 1 on host h exited with code 3 after 1.0 s");

  GenerationOutcome interrupted;
  interrupted.interrupt = 2;
  const auto stopped = storyLines({failed({workerExit(1, 3)}), interrupted}, 5);
  ASSERT_EQ(stopped.size(), 3u);
  EXPECT_EQ(stopped[0], "stopped in generation 1, after 1 restart; what each generation did:");
  EXPECT_EQ(stopped[2], "  generation 1: stopped by SIGINT (Interrupt)");

  const auto notRestartable = storyLines(
      {failed({workerExit(1, 3)}), failed({launcherFailure("host b: cannot find the program")})}, 5);
  ASSERT_EQ(notRestartable.size(), 3u);
  EXPECT_EQ(
      notRestartable[0],
      "not restarting: generation 1 failed in a way a restart cannot get past (1 restart of 5 used); what "
      "each generation did:");
  EXPECT_EQ(notRestartable[2], "  generation 1: host b: cannot find the program");
}

TEST(Restarts, TheAgentSpecCarriesTheGeneration) {
  AgentSpec s;
  s.host = "node2";
  s.jobId = "gyre-abc";
  s.secret = "s";
  s.storeCandidates = {"127.0.0.1:1234"};
  s.worldSize = 2;
  s.program = {"/bin/true"};
  s.restartCount = 2;
  s.maxRestarts = 3;
  const AgentSpec d = decodeSpec(encodeSpec(s));
  EXPECT_EQ(d.restartCount, 2);
  EXPECT_EQ(d.maxRestarts, 3);
  s.restartCount = -1;
  EXPECT_THROW(decodeSpec(encodeSpec(s)), ProtocolError);
  s.restartCount = 4;  // beyond the restarts allowed
  EXPECT_THROW(decodeSpec(encodeSpec(s)), ProtocolError);
}

// A store server on a scripted port that counts how many are open at once.
class ScriptedServer : public TcpStoreServer {
 public:
  ScriptedServer(std::uint16_t port, int& open, int& mostOpen) : port_(port), open_(open) {
    mostOpen = std::max(mostOpen, ++open_);
  }
  ~ScriptedServer() override { --open_; }
  std::uint16_t port() const override { return port_; }
  std::string address() const override { return "127.0.0.1:" + std::to_string(port_); }
  std::uint64_t refusedConnections() const override { return 0; }

 private:
  std::uint16_t port_;
  int& open_;
};

TEST(Restarts, AGenerationsStoreIsOnNoPortAnEarlierOneUsed) {
  // The kernel hands out 5001 (generation 0's) and 5002 (generation 1's) again before 5003.
  const std::vector<std::uint16_t> kernel = {5001, 5002, 5001, 5003, 5004};
  std::size_t next = 0;
  int open = 0, mostOpen = 0;
  auto listen = [&] { return std::make_unique<ScriptedServer>(kernel.at(next++), open, mostOpen); };
  std::unique_ptr<TcpStoreServer> server = listenAvoiding(listen, {5001, 5002});
  EXPECT_EQ(server->port(), 5003);
  EXPECT_EQ(next, 4u);
  EXPECT_EQ(mostOpen, 4) << "a refused listener was closed before the next one was opened";
  EXPECT_EQ(open, 1) << "the refused listeners were not closed";
  server = listenAvoiding(listen, {});
  EXPECT_EQ(server->port(), 5004);
}

TEST(Restarts, OutputSinkMarksEachRestartInTheLogsAndStartsTheTailsAfresh) {
  test::TempDir dir;
  {
    OutputSink sink(2, false, dir.path());
    sink.line(1, false, "generation 0 says", '\n');
    sink.line(1, false, "a cut lin", '\0');
    sink.startGeneration(1);
    EXPECT_TRUE(sink.tail(1).empty());
    sink.line(1, true, "generation 1 says", '\n');
    ASSERT_EQ(sink.tail(1).size(), 1u);
    EXPECT_EQ(sink.tail(1)[0], "generation 1 says");
  }
  std::ifstream in(dir.path() + "/rank.1.log");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "generation 0 says\na cut lin\n--- gyre run: restart 1 ---\ngeneration 1 says\n");
  std::ifstream in0(dir.path() + "/rank.0.log");
  std::stringstream text0;
  text0 << in0.rdbuf();
  EXPECT_EQ(text0.str(), "--- gyre run: restart 1 ---\n");
}

}  // namespace
}  // namespace gyre::launcher
