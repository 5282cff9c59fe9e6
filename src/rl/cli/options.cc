#include "rl/cli/options.h"

#include "common/numbers.h"
#include "gyre/errors.h"

namespace gyre::rl {

void addRlFlags(CLI::App& app, RlOptions& o) {
  app.add_option(
         "--algo", o.algo,
         "apex: Ape-X DQN (prioritized replay, per-actor epsilon); impala: IMPALA (actor-critic, V-trace)")
      ->capture_default_str();
  app.add_option("--env", o.env, "cartpole or acrobot")->capture_default_str();
  app.add_option("--actors", o.actors, "Rollout actors, one process each, beside the learner's")
      ->capture_default_str();
  app.add_option("--time-limit", o.timeLimitS, "Seconds to train, solved or not")->capture_default_str();
  app.add_option(
         "--target-return", o.targetReturn,
         "Solved when the mean greedy return of the last 100 evaluation episodes reaches it (stops the run)")
      ->capture_default_str();
  app.add_option("--max-env-steps", o.maxEnvSteps, "Stop after this many environment steps (0: no limit)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seeds the environments, the networks and the replay")
      ->capture_default_str();
  app.add_option("--run-dir", o.runDir,
                 "Where metrics.jsonl and return.svg go (default runs/rl-ALGO-ENV-TIME)");
  app.add_option("--lr", o.lr, "Adam's learning rate (0: the algorithm's, 5e-4 for apex, 1e-3 for impala)")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "Ape-X: transitions per learner update")->capture_default_str();
  app.add_option("--hidden", o.hidden, "Width of the Q-network's two hidden layers")->capture_default_str();
  app.add_option("--n-step", o.nStep, "Ape-X: rewards summed before bootstrapping")->capture_default_str();
  app.add_option("--gamma", o.gamma, "Discount")->capture_default_str();
  app.add_option("--replay-capacity", o.replayCapacity, "Transitions the replay keeps")
      ->capture_default_str();
  app.add_option("--alpha", o.alpha, "How much priority counts in sampling (0: uniform)")
      ->capture_default_str();
  app.add_option("--beta", o.betaStart, "Importance-sampling exponent at the start, annealed to 1")
      ->capture_default_str();
  app.add_option("--beta-steps", o.betaSteps, "Env steps over which beta reaches 1")->capture_default_str();
  app.add_option("--learning-starts", o.learningStarts, "Transitions in the replay before the first update")
      ->capture_default_str();
  app.add_option("--steps-per-update", o.stepsPerUpdate,
                 "At most this many env steps per learner update: the actors wait beyond it (0: no limit)")
      ->capture_default_str();
  app.add_option("--target-update", o.targetUpdate, "Updates between target-network copies")
      ->capture_default_str();
  app.add_option("--publish-every", o.publishEvery,
                 "Ape-X: updates between weights published to the actors (IMPALA publishes every update)")
      ->capture_default_str();
  app.add_option("--rollout-steps", o.rolloutSteps, "Ape-X: env steps an actor takes per call")
      ->capture_default_str();
  app.add_option("--unroll", o.unroll, "IMPALA: env steps an actor unrolls per call")->capture_default_str();
  app.add_option("--trajectories", o.trajectories, "IMPALA: unrolls per learner update")
      ->capture_default_str();
  app.add_option("--rho-bar", o.rhoBar, "IMPALA: V-trace's clipping of the importance weights (rho bar)")
      ->capture_default_str();
  app.add_option("--c-bar", o.cBar, "IMPALA: V-trace's clipping of the traces (c bar)")
      ->capture_default_str();
  app.add_option("--baseline-cost", o.baselineCost, "IMPALA: weight of the value loss")
      ->capture_default_str();
  app.add_option("--entropy-cost", o.entropyCost, "IMPALA: weight of the entropy bonus")
      ->capture_default_str();
  app.add_option("--eval-interval", o.evalInterval,
                 "Seconds between the starts of greedy evaluation episodes")
      ->capture_default_str();
  app.add_option("--report-every", o.reportEvery, "Seconds between live lines and metrics.jsonl records")
      ->capture_default_str();
  app.add_option("--actor-restarts", o.actorRestarts, "Times a lost actor is rebuilt on a live process")
      ->capture_default_str();
}

double learningRate(const RlOptions& o) {
  if (o.lr > 0) return o.lr;
  return o.algo == "impala" ? 1e-3 : 5e-4;
}

void validateRlOptions(const RlOptions& o) {
  if (o.algo != "apex" && o.algo != "impala")
    throw InvalidArgument("--algo must be apex or impala; got '" + o.algo + "'");
  if (o.env != "cartpole" && o.env != "acrobot")
    throw InvalidArgument("--env must be cartpole or acrobot; got '" + o.env + "'");
  numbers::checkInt("--actors", o.actors, 1, 64);
  numbers::check("--time-limit", o.timeLimitS,
                 {.min = 0, .max = numbers::kMaxSeconds, .minExclusive = true, .unit = "s"});
  numbers::check("--target-return", o.targetReturn, {});
  numbers::checkInt("--max-env-steps", o.maxEnvSteps, 0, std::int64_t{1} << 50, "0: no limit");
  numbers::check("--lr", o.lr, {.min = 0, .max = 1, .note = "0: the algorithm's"});
  numbers::checkInt("--batch", o.batch, 1, 65536);
  numbers::checkInt("--hidden", o.hidden, 1, 4096);
  numbers::checkInt("--n-step", o.nStep, 1, 100);
  numbers::check("--gamma", o.gamma, {.min = 0, .max = 1});
  numbers::checkInt("--replay-capacity", o.replayCapacity, 1, 100000000);
  numbers::check("--alpha", o.alpha, {.min = 0, .max = 1});
  numbers::check("--beta", o.betaStart, {.min = 0, .max = 1});
  numbers::checkInt("--beta-steps", o.betaSteps, 1, std::int64_t{1} << 50);
  numbers::checkInt("--learning-starts", o.learningStarts, 1, o.replayCapacity, "at most --replay-capacity");
  numbers::check("--steps-per-update", o.stepsPerUpdate, {.min = 0, .max = 1e6, .note = "0: no limit"});
  numbers::checkInt("--target-update", o.targetUpdate, 1, 1000000000);
  numbers::checkInt("--publish-every", o.publishEvery, 1, 1000000000);
  numbers::checkInt("--rollout-steps", o.rolloutSteps, 1, 100000);
  numbers::checkInt("--unroll", o.unroll, 1, 100000);
  numbers::checkInt("--trajectories", o.trajectories, 1, 100000);
  numbers::check("--rho-bar", o.rhoBar, {.min = 0, .max = 1e6, .minExclusive = true});
  numbers::check("--c-bar", o.cBar, {.min = 0, .max = 1e6, .minExclusive = true});
  numbers::check("--baseline-cost", o.baselineCost, {.min = 0, .max = 1e6});
  numbers::check("--entropy-cost", o.entropyCost, {.min = 0, .max = 1e6});
  numbers::check("--eval-interval", o.evalInterval, {.min = 0, .max = 3600, .unit = "s"});
  numbers::check("--report-every", o.reportEvery, {.min = 0.01, .max = 3600, .unit = "s"});
  numbers::checkInt("--actor-restarts", o.actorRestarts, 0, 1000000);
}

std::vector<std::string> rlWorkerArguments(const RlOptions& o) {
  auto f = [](double v) { return numbers::format(v); };
  return {"--algo",
          o.algo,
          "--env",
          o.env,
          "--actors",
          std::to_string(o.actors),
          "--time-limit",
          f(o.timeLimitS),
          "--target-return",
          f(o.targetReturn),
          "--max-env-steps",
          std::to_string(o.maxEnvSteps),
          "--seed",
          std::to_string(o.seed),
          "--run-dir",
          o.runDir,
          "--lr",
          f(o.lr),
          "--batch",
          std::to_string(o.batch),
          "--hidden",
          std::to_string(o.hidden),
          "--n-step",
          std::to_string(o.nStep),
          "--gamma",
          f(o.gamma),
          "--replay-capacity",
          std::to_string(o.replayCapacity),
          "--alpha",
          f(o.alpha),
          "--beta",
          f(o.betaStart),
          "--beta-steps",
          std::to_string(o.betaSteps),
          "--learning-starts",
          std::to_string(o.learningStarts),
          "--steps-per-update",
          f(o.stepsPerUpdate),
          "--target-update",
          std::to_string(o.targetUpdate),
          "--publish-every",
          std::to_string(o.publishEvery),
          "--rollout-steps",
          std::to_string(o.rolloutSteps),
          "--unroll",
          std::to_string(o.unroll),
          "--trajectories",
          std::to_string(o.trajectories),
          "--rho-bar",
          f(o.rhoBar),
          "--c-bar",
          f(o.cBar),
          "--baseline-cost",
          f(o.baselineCost),
          "--entropy-cost",
          f(o.entropyCost),
          "--eval-interval",
          f(o.evalInterval),
          "--report-every",
          f(o.reportEvery),
          "--actor-restarts",
          std::to_string(o.actorRestarts)};
}

}  // namespace gyre::rl
