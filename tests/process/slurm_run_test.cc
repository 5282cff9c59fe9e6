// gyre jobs under a real Slurm (tests/slurm/cluster.sh: munged, slurmctld and slurmd from Debian's
// packages, on loopback): ranks started by srun find each other from Slurm's variables; gyre run
// inside an sbatch allocation takes its nodes and tasks and starts each node's workers as a step
// of the job; scancel stops every worker; a killed worker fails the others with the error it
// gives under gyre run; an unreachable Slurm is an error naming the command. Nothing is left
// running.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/jobs.h"
#include "support/processes.h"
#include "support/programs.h"
#include "support/slurm_cluster.h"

namespace gyre {
namespace {

#ifdef GYRE_TEST_HAS_TOOL

using test::ProgramRun;
using Clock = std::chrono::steady_clock;

class SlurmRun : public test::SlurmTest {
 protected:
  // `sbatch --wait` of one command line; returns sbatch's run (its exit code is the job's) and
  // the job's output file.
  static ProgramRun batch(const std::vector<std::string>& options, const std::string& command,
                          std::string* output) {
    static int count = 0;
    *output = dir() + "/batch-" + std::to_string(++count) + ".out";
    std::vector<std::string> args = {"--wait", "--output", *output, "--chdir", dir()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--wrap");
    args.push_back(command);
    return slurm("sbatch", args);
  }
  static std::string joined(const std::vector<std::string>& processes) {
    std::string text;
    for (const std::string& p : processes) text += p + "\n";
    return text;
  }
  static std::vector<std::string> lines(const std::string& text, const std::string& containing) {
    std::vector<std::string> found;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.find(containing) != std::string::npos) found.push_back(line);
    return found;
  }
};

TEST_F(SlurmRun, RanksStartedBySrunMeetThroughSlurmsVariables) {
  const ProgramRun run = slurm("srun", {"-n", "3", test::binDir() + "/gyre_init_check"});
  ASSERT_EQ(run.exitCode, 0) << run.describe();
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(run.out.find("rank " + std::to_string(rank) + " of 3 ok (launcher slurm, local rank " +
                           std::to_string(rank) + " of 3"),
              std::string::npos)
        << run.out;
}

// gyre run in a batch script: 3 tasks of the allocation are its 3 slots, and the workers run in a
// step of the job (srun sets SLURM_STEP_ID; the batch script itself has none), under gyre's
// variables, which win over Slurm's.
TEST_F(SlurmRun, GyreRunInsideSbatchTakesTheAllocationAndStartsItsWorkersAsAStep) {
  std::string output;
  const ProgramRun run =
      batch({"-n", "3"},
            test::gyreTool() +
                " run -- /bin/sh -c 'echo worker $GYRE_RANK of $GYRE_WORLD_SIZE step $SLURM_STEP_ID'",
            &output);
  ASSERT_EQ(run.exitCode, 0) << run.describe() << test::readFile(output);
  const std::string out = test::readFile(output);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_NE(out.find("worker " + std::to_string(rank) + " of 3 step 0"), std::string::npos) << out;

  // And a real job: the ranks meet through gyre run's store, not Slurm's derived port.
  const ProgramRun check =
      batch({"-n", "2"}, test::gyreTool() + " run -- " + test::binDir() + "/gyre_init_check", &output);
  ASSERT_EQ(check.exitCode, 0) << check.describe() << test::readFile(output);
  EXPECT_EQ(lines(test::readFile(output), "of 2 ok (launcher gyre").size(), 2u) << test::readFile(output);

  // More workers than the allocation's tasks: refused, saying where the slots came from.
  const ProgramRun tooMany =
      batch({"-n", "2"}, test::gyreTool() + " run -np 3 -- " + test::binDir() + "/gyre_init_check", &output);
  EXPECT_NE(tooMany.exitCode, 0) << tooMany.describe();
  EXPECT_NE(test::readFile(output).find("-np 3 asks for more workers than the 2 tasks of Slurm job "),
            std::string::npos)
      << test::readFile(output);
}

// scancel of a running job: gyre run, its srun agents and every worker are gone within 5 s, and
// so are the job's slurmstepd processes.
TEST_F(SlurmRun, ScancelStopsEveryWorkerWithinFiveSeconds) {
  const std::string tag = dir() + "/scancel-tag";
  const ProgramRun submit =
      slurm("sbatch", {"--parsable", "-n", "2", "--output", dir() + "/scancel.out", "--wrap",
                       test::gyreTool() + " run -- " + test::binDir() +
                           "/gyre_tune_trial --x 0.3 --iterations 100000 --sleep-ms 100 --tag " + tag});
  ASSERT_EQ(submit.exitCode, 0) << submit.describe();
  const std::string job = submit.out.substr(0, submit.out.find_first_of(";\n"));
  const auto workers = [&] {  // processes of the trial program itself, not those with it in their arguments
    std::size_t n = 0;
    for (const std::string& p : test::processesWith(tag))
      n += p.find(": " + test::binDir() + "/gyre_tune_trial ") != std::string::npos;
    return n;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (workers() < 2 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(workers(), 2u) << squeue() << test::readFile(dir() + "/scancel.out");

  const ProgramRun cancel = slurm("scancel", {job});
  ASSERT_EQ(cancel.exitCode, 0) << cancel.describe();
  const auto cancelled = Clock::now();
  const std::string stepd = "slurmstepd: [" + job + ".";
  while ((!test::processesWith(tag).empty() || !test::processesWith(stepd).empty()) &&
         Clock::now() - cancelled < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double seconds = std::chrono::duration<double>(Clock::now() - cancelled).count();
  EXPECT_TRUE(test::processesWith(tag).empty()) << joined(test::processesWith(tag));
  EXPECT_TRUE(test::processesWith(stepd).empty()) << joined(test::processesWith(stepd));
  EXPECT_LT(seconds, 5.0) << "the job's processes were gone only after " << seconds << " s";
  // Slurm signals every step at once: gyre run sees SIGTERM, or first its workers killed by it.
  const std::string out = test::readFile(dir() + "/scancel.out");
  EXPECT_TRUE(out.find("gyre run: interrupted by SIGTERM") != std::string::npos ||
              out.find("was killed by SIGTERM") != std::string::npos)
      << out;
}

// A worker killed with SIGKILL: under srun, the others fail with the same PeerLostError as under
// gyre run (naming the lost rank), and srun ends the job with a failure; under gyre run inside
// the allocation, gyre run reports the killed rank as it does outside Slurm.
TEST_F(SlurmRun, AKilledWorkerFailsTheOthersWithTheErrorItGivesUnderGyreRun) {
  const std::string lost = "lost rank 1 at ";
  const std::string cause = "its process died or its connection broke";
  const auto start = Clock::now();
  const ProgramRun srun = slurm("srun", {"-n", "3", test::binDir() + "/gyre_peer_loss_check", "1"});
  EXPECT_NE(srun.exitCode, 0) << srun.describe();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(60));
  const ProgramRun local = test::runProgram(
      {{test::gyreTool(), "run", "-np", "3", "--", test::binDir() + "/gyre_peer_loss_check", "1"},
       test::cleanEnvironment()},
      std::chrono::seconds(120));
  EXPECT_EQ(local.exitCode, 137) << local.describe();
  for (const ProgramRun* run : {&srun, &local}) {
    const std::vector<std::string> survivors = lines(run->out, lost);
    ASSERT_FALSE(survivors.empty()) << run->out << run->err;
    for (const std::string& line : survivors) EXPECT_NE(line.find(cause), std::string::npos) << line;
  }
  EXPECT_NE(srun.err.find("task 1: Killed"), std::string::npos) << srun.err;

  std::string output;
  const ProgramRun inside =
      batch({"-n", "3"}, test::gyreTool() + " run -- " + test::binDir() + "/gyre_peer_loss_check 1", &output);
  EXPECT_NE(inside.exitCode, 0) << inside.describe();
  const std::string out = test::readFile(output);
  EXPECT_NE(out.find(" was killed by SIGKILL (Killed) after "), std::string::npos) << out;
  EXPECT_NE(local.err.find(" was killed by SIGKILL (Killed) after "), std::string::npos) << local.err;
  EXPECT_FALSE(lines(out, lost).empty()) << out;
}

// gyre run in an allocation whose controller cannot be reached: srun cannot start the agents, and
// gyre run says which command failed and what srun said, instead of waiting.
TEST_F(SlurmRun, AnUnreachableSlurmIsAnErrorNamingTheCommand) {
  const std::string dead = dir() + "/dead.conf";
  std::string conf = test::readFile(SlurmTest::conf());
  const std::size_t at = conf.find("SlurmctldPort=");
  conf.replace(at, conf.find('\n', at) - at, "SlurmctldPort=1");
  { std::ofstream(dead) << conf; }
  test::Environment e = env();
  e["SLURM_CONF"] = dead;
  e["SLURM_JOB_ID"] = "4242";
  e["SLURM_JOB_NODELIST"] = "localhost";
  e["SLURM_TASKS_PER_NODE"] = "2";
  const auto start = Clock::now();
  const ProgramRun run = test::runProgram(
      {{test::gyreTool(), "run", "--start-timeout", "20", "--", test::binDir() + "/gyre_init_check"}, e},
      std::chrono::seconds(120));
  EXPECT_EQ(run.exitCode, 1) << run.describe();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(run.err.find("Unable to contact slurm controller"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(
                "its agent (srun --nodes=1 --ntasks=1 --overlap --kill-on-bad-exit=1 --cpu-bind=none --quiet "
                "--nodelist=localhost "),
            std::string::npos)
      << run.err;
}

#endif  // GYRE_TEST_HAS_TOOL

}  // namespace
}  // namespace gyre
