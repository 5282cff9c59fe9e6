#include "rl.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "launcher/agent.h"
#include "launcher/job.h"
#include "launcher/process.h"
#include "rl/cli/options.h"
#include "run_dir.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRlWorker = "gyre_rl_worker";

int rl(rl::RlOptions o) {
  rl::validateRlOptions(o);
  const std::string worker = (fs::path(launcher::selfExecutable()).parent_path() / kRlWorker).string();
  if (::access(worker.c_str(), X_OK) != 0)
    throw Error("this gyre was built without the learners: " + worker +
                " is missing (install libtorch-dev, then configure and build again; see docs/rl.md)");
  const fs::path runDir = fs::absolute(o.runDir.empty() ? uniqueRunDir(fmt::format("rl-{}-{}", o.algo, o.env))
                                                        : fs::path(o.runDir));
  std::error_code ec;
  fs::create_directories(runDir, ec);
  if (ec) throw Error("cannot create the run directory " + runDir.string() + ": " + ec.message());
  o.runDir = runDir.string();
  fmt::print(
      "gyre rl: {} on {}, {} rollout actor{} (one process each) and the learner; stops when the mean "
      "greedy return of 100 episodes reaches {}, or after {} s\n",
      o.algo, o.env, o.actors, o.actors == 1 ? "" : "s", o.targetReturn, o.timeLimitS);
  fmt::print("run directory: {}\n", runDir.string());
  std::fflush(stdout);

  launcher::RunOptions run;
  run.np = o.actors + 1;
  run.tagOutput = false;
  run.threads = 1;
  run.keepGoing = true;  // a lost actor's process does not stop the run: its actor is rebuilt
  // The actors step without pause, so with more processes than cores a learner that spins while
  // it waits for its replay takes the cycles the replay needs to answer (Ape-X's updates/s fell
  // from 1,290 to 1,070 on 2 cores with 3 processes). A value the user set wins.
  if (o.actors + 1 > launcher::usableCores() && !config::isSet(config::processEnvironment(), "GYRE_SPIN_US"))
    run.exports.emplace_back("GYRE_SPIN_US", "0");
  run.program = {worker};
  const std::vector<std::string> arguments = rl::rlWorkerArguments(o);
  run.program.insert(run.program.end(), arguments.begin(), arguments.end());
  return launcher::runJob(run);
}

}  // namespace

void addRl(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<rl::RlOptions>();
  CLI::App* cmd = app.add_subcommand("rl",
                                     "Distributed reinforcement learning on gyre::rt: Ape-X DQN, IMPALA or PPO, "
                                     "rollout actors in their own processes");
  cmd->footer(
      "Starts the learner (rank 0) and one process per rollout actor on this host (gyre run --keep-going).\n"
      "Ape-X: each actor steps its own environment with its own epsilon and the latest published\n"
      "weights; the learner feeds their transitions to a prioritized replay actor, trains a double DQN\n"
      "on n-step returns and publishes its weights every --publish-every updates. IMPALA: each actor\n"
      "unrolls its copy of the policy for --unroll steps; the learner trains the actor-critic on\n"
      "--trajectories unrolls at a time with V-trace and publishes after every update. PPO: the same\n"
      "actors unroll the newest policy; the learner makes --ppo-epochs passes over each batch of\n"
      "--trajectories unrolls in minibatches, on the clipped surrogate with GAE advantages. A greedy\n"
      "evaluator measures the policy being learned. Every --report-every seconds a line shows env\n"
      "steps/s, updates/s and the mean return of the last 100 episodes (the actors', and the greedy\n"
      "evaluator's); the run directory (default runs/rl-ALGO-ENV-TIME) gets metrics.jsonl and\n"
      "return.svg. An actor whose process is killed is rebuilt on a live process at its next call\n"
      "(--actor-restarts). See docs/rl.md.\n\n"
      "Examples:\n"
      "  gyre rl --algo apex --env cartpole --actors 2\n"
      "  gyre rl --algo impala --env cartpole --actors 2\n"
      "  gyre rl --algo ppo --env cartpole --actors 2\n"
      "  gyre rl --env acrobot --actors 2 --target-return -100 --time-limit 300");
  rl::addRlFlags(*cmd, *o);
  cmd->callback([o, &action] { action = [o] { return rl(*o); }; });
}

}  // namespace gyre::app
