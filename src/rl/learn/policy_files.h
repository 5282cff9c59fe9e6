// A learner's policy on disk: `gyre rl --checkpoint-dir DIR` keeps DIR/policy.json current (every
// 5 s and at the end, written atomically), `--resume` starts the learner from it, and `--export
// PATH` writes the trained policy there at the end. The file (docs/rl.md, "Policy files") is JSON:
// {"format": "gyre-policy-1", "algo", "env", "observations", "actions", "outputs", "hidden",
// "env_steps", "updates", "weights": [float32 values in the network's parameter order]}, the
// network two hidden layers of `hidden` ReLU units (makeMlp); gyre.rl.load_policy reads it in
// Python, and gyre.rl's export_policy(PATH.json) writes one --resume takes.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "rl/cli/options.h"
#include "rl/learn/common.h"

namespace gyre::rl {

class PolicyFiles {
 public:
  // `outputs`: the network's outputs (the actions, and the value for the actor-critics).
  PolicyFiles(const RlOptions& o, const EnvShape& env, int outputs);

  // With --resume: the weights of its policy file (DIR/policy.json for a directory; said on
  // stdout); InvalidArgument naming the file when it is missing, unreadable or of another
  // algorithm, environment or network. Else nullopt.
  std::optional<Weights> resumed() const;
  // With --checkpoint-dir: DIR/policy.json of weights(), when 5 s have passed since the last one.
  void maybeSave(const std::function<Weights()>& weights, const RlProgress& p);
  // At the end: the checkpoint (with --checkpoint-dir) and the export (with --export).
  void finish(const Weights& weights, const RlProgress& p);

 private:
  void write(const std::string& path, const Weights& weights, const RlProgress& p) const;

  const RlOptions& o_;
  EnvShape env_;
  int outputs_;
  std::chrono::steady_clock::time_point lastSave_ = std::chrono::steady_clock::now();
};

}  // namespace gyre::rl
