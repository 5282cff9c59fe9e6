// `gyre info` as a user runs it, and the bounded command runner it asks launchers their version
// with: it must capture what a command says, and never wait past its time-out.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "info/info_system.h"
#include "support/jobs.h"

namespace gyre::info {
namespace {

using std::chrono::milliseconds;

TEST(RunCommand, CapturesStdoutAndStderrAndTheExitCode) {
  const CommandResult r = runCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.timedOut);
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("out\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("err\n"), std::string::npos) << r.output;
  EXPECT_NE(r.error.find("exited with code 3"), std::string::npos) << r.error;
  EXPECT_TRUE(runCommand({"true"}).ok());
}

TEST(RunCommand, AMissingProgramDoesNotStart) {
  const CommandResult r = runCommand({"gyre-no-such-program-anywhere"});
  EXPECT_FALSE(r.started);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("gyre-no-such-program-anywhere"), std::string::npos) << r.error;
  EXPECT_THROW(runCommand({}), InvalidArgument);
}

TEST(RunCommand, AHangingCommandIsKilledAtTheTimeOutWithWhatItStarted) {
  CommandOptions options;
  options.timeout = milliseconds(300);
  const auto start = Clock::now();
  // The background sleep keeps the pipe open after its parent dies: it must be killed too.
  const CommandResult r = runCommand({"sh", "-c", "echo begun; sleep 30 & sleep 30"}, options);
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_TRUE(r.timedOut);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.output.find("begun"), std::string::npos) << r.output;
  EXPECT_NE(r.error.find("did not finish within 300 ms"), std::string::npos) << r.error;
}

// True while `pid` exists and is not a zombie (an orphan's reaper may be slow, or absent).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(RunCommand, AnExitedCommandsLingeringChildNeitherHoldsUsUpNorSurvives) {
  CommandOptions options;
  options.timeout = milliseconds(20000);
  const auto start = Clock::now();
  const CommandResult r = runCommand({"sh", "-c", "sleep 30 & echo $!"}, options);
  EXPECT_LT(secondsSince(start), 5.0);
  ASSERT_TRUE(r.ok()) << r.error;
  const pid_t child = std::stoi(r.output);
  const Deadline gone = Deadline::after(milliseconds(5000));
  while (running(child) && !gone.expired()) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(running(child)) << "the background sleep " << child << " outlived runCommand";
}

TEST(RunCommand, OutputIsBoundedAndTheEnvironmentAdjusted) {
  CommandOptions options;
  options.maxOutputBytes = 1000;
  const CommandResult big = runCommand({"sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x"}, options);
  EXPECT_TRUE(big.ok()) << big.error;
  EXPECT_EQ(big.output.size(), 1000u);

  ::setenv("GYRE_INFO_TEST_REMOVED", "still here", 1);
  CommandOptions env;
  env.setEnv = {{"GYRE_INFO_TEST_SET", "hello"}};
  env.unsetEnv = {"GYRE_INFO_TEST_REMOVED"};
  const CommandResult r =
      runCommand({"sh", "-c", "echo \"[$GYRE_INFO_TEST_SET][${GYRE_INFO_TEST_REMOVED-unset}]\""}, env);
  ::unsetenv("GYRE_INFO_TEST_REMOVED");
  EXPECT_EQ(r.output, "[hello][unset]\n");
}

// Runs the built tool with a knob set, as a user would.
CommandResult runGyreInfo(std::vector<std::string> extra) {
  std::vector<std::string> argv{test::gyreTool(), "info"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandOptions options;
  options.timeout = milliseconds(30000);
  options.setEnv = {{"GYRE_TIMEOUT_MS", "4321"}, {"GYRE_TRANSPOTR", "tcp"}};
  // Only these: not the test runner's own (GYRE_TEST_QUICK in the sanitizer stages) or a user's.
  for (const auto& [name, value] : processEnvironment())
    if (name.starts_with("GYRE_")) options.unsetEnv.push_back(name);
  return runCommand(argv, options);
}

TEST(GyreInfo, PrintsEverySectionAndTheKnobsSet) {
  const CommandResult r = runGyreInfo({});
  ASSERT_TRUE(r.ok()) << r.error << "\n" << r.output;
  for (const char* part : {"gyre ",
                           "Available transports:",
                           "[X] tcp",
                           "[X] shm",
                           "mpi",
                           "Available launchers:",
                           "gyre run",
                           "mpirun",
                           "srun",
                           "torchrun",
                           "ssh",
                           "libtorch",
                           "BLAS (",
                           "kind ",
                           "Cores:",
                           "online",
                           "usable",
                           "GYRE_NUM_THREADS",
                           "Environment knobs",
                           "GYRE_SHM_RING_BYTES",
                           "GYRE_TIMEOUT_MS",
                           "= 4321",
                           "GYRE_TRANSPOTR=tcp"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in\n" << r.output;
}

TEST(GyreInfo, JsonIsOneObjectWithTheSameFacts) {
  const CommandResult r = runGyreInfo({"--json"});
  ASSERT_TRUE(r.ok()) << r.error << "\n" << r.output;
  // A reference-BLAS warning goes to stderr, which runCommand interleaves: parse from the brace.
  const auto open = r.output.find('{');
  ASSERT_NE(open, std::string::npos) << r.output;
  const auto close = r.output.find("}\n", open);
  ASSERT_NE(close, std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(open, close + 1 - open));
  EXPECT_EQ(j["transports"]["tcp"], true);
  EXPECT_GE(j["cores"]["usable"].get<int>(), 1);
  EXPECT_EQ(j["launchers"][0]["name"], "gyre run");
  EXPECT_TRUE(j["blas"].contains("kind"));
  EXPECT_EQ(j["unknown_gyre_variables"], nlohmann::json::array({"GYRE_TRANSPOTR"}));
  bool found = false;
  for (const auto& k : j["knobs"])
    if (k["name"] == "GYRE_TIMEOUT_MS") found = k["value"] == "4321";
  EXPECT_TRUE(found) << j["knobs"].dump();
}

}  // namespace
}  // namespace gyre::info
