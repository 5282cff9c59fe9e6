// gyre::rl's learners on gyre::rt, both with rollout actors in processes of their own (on ranks
// 1..size−1 in turn, or here when alone), a greedy evaluator beside the learner (rank 0) and the
// weights published as objects (rt.put). docs/rl.md.
//
// Ape-X DQN (Horgan et al. 2018; apex.cc): each actor has its own ε (ε_i = 0.4^(1 + 7i/(N−1)); 0.1
// for a single actor), steps its environment with the latest weights and computes its
// transitions' initial priorities; the learner feeds them to a prioritized replay actor, samples
// from it, trains a double DQN on n-step returns and sends back new priorities.
//
// IMPALA (Espeholt et al. 2018; impala.cc): each actor unrolls its policy for --unroll steps and
// sends the trajectory with its policy's logits; the learner trains an actor-critic on batches of
// them, correcting for the policy lag with V-trace. PPO (Schulman et al. 2017; ppo.cc): the same
// actors, a clipped-surrogate learner on GAE advantages, several passes over each batch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gyre/rt.h"
#include "rl/cli/options.h"

namespace gyre::rl {

// What the learner reports, every --report-every seconds and at the end.
struct RlProgress {
  double seconds = 0;
  std::int64_t envSteps = 0;
  std::int64_t updates = 0;
  double envStepsPerS = 0;  // since the previous report
  double updatesPerS = 0;
  std::int64_t episodes = 0;      // finished by the actors
  double actorReturn100 = 0;      // mean return of the actors' last 100 episodes (with their ε)
  std::int64_t evalEpisodes = 0;  // greedy evaluation episodes
  double evalReturn100 = 0;       // mean return of the last 100 greedy episodes
  int actorsRestarted = 0;        // rollout actors rebuilt after their process was lost
  bool solved = false;            // evalReturn100 ≥ --target-return over 100 episodes
  double solvedAtS = -1;
};

// The epsilon of actor i of n.
double apexEpsilon(int i, int n);

// Run on `rt` (rank 0, the learner) until solved, --time-limit or --max-env-steps; `report` gets
// each progress record.
RlProgress runApex(rt::Runtime& rt, const RlOptions& o, const std::function<void(const RlProgress&)>& report);
RlProgress runImpala(rt::Runtime& rt, const RlOptions& o,
                     const std::function<void(const RlProgress&)>& report);
// PPO (ppo.cc): the actors unroll the newest policy; the learner trains on each batch of them.
RlProgress runPpo(rt::Runtime& rt, const RlOptions& o, const std::function<void(const RlProgress&)>& report);

}  // namespace gyre::rl
