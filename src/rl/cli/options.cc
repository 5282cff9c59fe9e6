#include "rl/cli/options.h"

#include <variant>

#include "common/numbers.h"
#include "gyre/errors.h"

namespace gyre::rl {
namespace {

using numbers::kMaxSeconds;
using numbers::kNoMax;

// One flag: its name, field, help, and for a number the range it must lie in (note: what the
// range's message adds, such as "0: no limit"; minExclusive: (min, max]).
struct RlFlag {
  const char* name;
  std::variant<std::string RlOptions::*, int RlOptions::*, std::int64_t RlOptions::*,
               std::uint64_t RlOptions::*, double RlOptions::*>
      field;
  const char* help;
  double min = -kNoMax;
  double max = kNoMax;
  const char* note = "";
  bool minExclusive = false;
  const char* unit = "";  // "s": shown after the range
};

// Every flag of `gyre rl` and gyre_rl_worker, once: both parse it, the tool hands it on, and
// validateRlOptions checks its range (the choices of --algo and --env beside).
const std::vector<RlFlag>& flags() {
  static const std::vector<RlFlag> table = {
      {"--algo", &RlOptions::algo,
       "apex: Ape-X DQN (prioritized replay, per-actor epsilon); impala: IMPALA (actor-critic, V-trace); ppo: "
       "PPO (clipped surrogate, GAE)"},
      {"--env", &RlOptions::env, "cartpole or acrobot"},
      {"--actors", &RlOptions::actors, "Rollout actors, one process each, beside the learner's", 1, 64},
      {"--time-limit", &RlOptions::timeLimitS, "Seconds to train, solved or not", 0, kMaxSeconds, "", true,
       "s"},
      {"--target-return", &RlOptions::targetReturn,
       "Solved when the mean greedy return of the last 100 evaluation episodes reaches it (stops the run)"},
      {"--max-env-steps", &RlOptions::maxEnvSteps, "Stop after this many environment steps (0: no limit)", 0,
       1e15, "0: no limit"},
      {"--seed", &RlOptions::seed, "Seeds the environments, the networks and the replay", 0, 1e15},
      {"--run-dir", &RlOptions::runDir,
       "Where metrics.jsonl and return.svg go (default runs/rl-ALGO-ENV-TIME)"},
      {"--checkpoint-dir", &RlOptions::checkpointDir,
       "Keep the learner's policy in DIR/policy.json (every 5 s and at the end, written atomically)"},
      {"--resume", &RlOptions::resume,
       "Start the learner from this policy: a --checkpoint-dir's policy.json, or a policy file (--export's, "
       "or gyre.rl's export_policy(PATH.json))"},
      {"--export", &RlOptions::exportPath, "Write the trained policy to this file at the end (JSON, docs/rl.md)"},
      {"--lr", &RlOptions::lr, "Adam's learning rate (0: the algorithm's, 5e-4 for apex, 1e-3 for impala and ppo)", 0,
       1, "0: the algorithm's"},
      {"--hidden", &RlOptions::hidden, "Width of the networks' two hidden layers", 1, 4096},
      {"--gamma", &RlOptions::gamma, "Discount", 0, 1},
      {"--batch", &RlOptions::batch, "Ape-X: transitions per learner update", 1, 65536},
      {"--n-step", &RlOptions::nStep, "Ape-X: rewards summed before bootstrapping", 1, 100},
      {"--replay-capacity", &RlOptions::replayCapacity, "Ape-X: transitions the replay keeps", 1, 1e8},
      {"--alpha", &RlOptions::alpha, "Ape-X: how much priority counts in sampling (0: uniform)", 0, 1},
      {"--beta", &RlOptions::betaStart, "Ape-X: importance-sampling exponent at the start, annealed to 1", 0,
       1},
      {"--beta-steps", &RlOptions::betaSteps, "Ape-X: env steps over which beta reaches 1", 1, 1e15},
      {"--learning-starts", &RlOptions::learningStarts,
       "Ape-X: transitions in the replay before the first update (at most --replay-capacity)", 1, 1e8},
      {"--steps-per-update", &RlOptions::stepsPerUpdate,
       "Ape-X: at most this many env steps per learner update, the actors wait beyond it (0: no limit)", 0,
       1e6, "0: no limit"},
      {"--target-update", &RlOptions::targetUpdate, "Ape-X: updates between target-network copies", 1, 1e9},
      {"--publish-every", &RlOptions::publishEvery,
       "Ape-X: updates between weights published to the actors (IMPALA publishes every update)", 1, 1e9},
      {"--rollout-steps", &RlOptions::rolloutSteps, "Ape-X: env steps an actor takes per call", 1, 100000},
      {"--unroll", &RlOptions::unroll,
       "IMPALA, PPO: env steps an actor unrolls per call (0: the algorithm's, 50 for impala, 128 for ppo)", 0,
       100000, "0: the algorithm's"},
      {"--trajectories", &RlOptions::trajectories, "IMPALA, PPO: unrolls per learner update (0: the algorithm's, 8)",
       0, 100000, "0: the algorithm's"},
      {"--rho-bar", &RlOptions::rhoBar, "IMPALA: V-trace's clipping of the importance weights (rho bar)", 0,
       1e6, "", true},
      {"--c-bar", &RlOptions::cBar, "IMPALA: V-trace's clipping of the traces (c bar)", 0, 1e6, "", true},
      {"--baseline-cost", &RlOptions::baselineCost, "IMPALA, PPO: weight of the value loss", 0, 1e6},
      {"--entropy-cost", &RlOptions::entropyCost, "IMPALA, PPO: weight of the entropy bonus", 0, 1e6},
      {"--ppo-epochs", &RlOptions::ppoEpochs, "PPO: passes over each batch", 1, 1000},
      {"--minibatch", &RlOptions::minibatch, "PPO: env steps per gradient step", 1, 1e7},
      {"--clip", &RlOptions::clip, "PPO: the surrogate's ratio is clipped to 1 +- clip", 0, 10, "", true},
      {"--gae-lambda", &RlOptions::gaeLambda, "PPO: lambda of the generalized advantage estimate", 0, 1},
      {"--eval-interval", &RlOptions::evalInterval,
       "Seconds between the starts of greedy evaluation episodes", 0, 3600, "", false, "s"},
      {"--report-every", &RlOptions::reportEvery, "Seconds between live lines and metrics.jsonl records",
       0.01, 3600, "", false, "s"},
      {"--actor-restarts", &RlOptions::actorRestarts, "Times a lost actor is rebuilt on a live process", 0,
       1e6},
  };
  return table;
}

}  // namespace

double learningRate(const RlOptions& o) {
  if (o.lr > 0) return o.lr;
  return o.algo == "apex" ? 5e-4 : 1e-3;
}

int unrollOf(const RlOptions& o) {
  return o.unroll > 0 ? o.unroll : o.algo == "ppo" ? 128 : 50;
}

int trajectoriesOf(const RlOptions& o) {
  return o.trajectories > 0 ? o.trajectories : 8;
}

void addRlFlags(CLI::App& app, RlOptions& o) {
  for (const RlFlag& f : flags())
    std::visit([&](auto field) { app.add_option(f.name, o.*field, f.help)->capture_default_str(); }, f.field);
}

void validateRlOptions(const RlOptions& o) {
  if (o.algo != "apex" && o.algo != "impala" && o.algo != "ppo")
    throw InvalidArgument("--algo must be apex, impala or ppo; got '" + o.algo + "'");
  if (o.env != "cartpole" && o.env != "acrobot")
    throw InvalidArgument("--env must be cartpole or acrobot; got '" + o.env + "'");
  for (const RlFlag& f : flags()) {
    if (const auto* d = std::get_if<double RlOptions::*>(&f.field)) {
      numbers::check(
          f.name, o.**d,
          {.min = f.min, .max = f.max, .minExclusive = f.minExclusive, .unit = f.unit, .note = f.note});
    } else if (!std::holds_alternative<std::string RlOptions::*>(f.field)) {
      const std::int64_t value = std::visit(
          [&](auto field) -> std::int64_t {
            if constexpr (std::is_same_v<decltype(field), std::string RlOptions::*>)
              return 0;
            else
              return static_cast<std::int64_t>(o.*field);
          },
          f.field);
      numbers::checkInt(f.name, value, static_cast<std::int64_t>(f.min), static_cast<std::int64_t>(f.max),
                        f.note);
    }
  }
  numbers::checkInt("--learning-starts", o.learningStarts, 1, o.replayCapacity, "at most --replay-capacity");
}

std::vector<std::string> rlWorkerArguments(const RlOptions& o) {
  std::vector<std::string> out;
  for (const RlFlag& f : flags()) {
    out.emplace_back(f.name);
    out.push_back(std::visit(
        [&](auto field) -> std::string {
          using T = std::decay_t<decltype(o.*field)>;
          if constexpr (std::is_same_v<T, std::string>)
            return o.*field;
          else if constexpr (std::is_same_v<T, double>)
            return numbers::format(o.*field);
          else
            return std::to_string(o.*field);
        },
        f.field));
  }
  return out;
}

}  // namespace gyre::rl
