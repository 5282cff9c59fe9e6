"""gyre's policy files (docs/rl.md, "Policy files"): what `gyre rl --export` and --checkpoint-dir
write and --resume reads, and what gyre.rl's export_policy(PATH.json) writes. JSON: the format,
the algorithm and environment, the network's sizes and its weights (float32, in the network's
parameter order; two hidden layers of ReLU units)."""
import json
import os

import numpy as np
import torch

from ._policy import flat_weights, load_flat

FORMAT = "gyre-policy-1"
_NAMES = {"PPO": "ppo", "IMPALA": "impala"}


class Policy:
    """A trained policy read from a policy file: compute_single_action(obs) is the greedy action
    (argmax over the first `actions` outputs: the logits, or Ape-X's Q-values)."""

    def __init__(self, meta, net):
        self.meta, self.net, self.actions = meta, net, meta["actions"]

    def compute_single_action(self, observation):
        with torch.no_grad():
            out = self.net(torch.as_tensor(np.asarray(observation, dtype=np.float32)))
        return int(out[:self.actions].argmax())


def _mlp(observations, outputs, hidden):
    return torch.nn.Sequential(torch.nn.Linear(observations, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, outputs))


def load_policy(path):
    """The policy in a gyre policy file (gyre rl --export, a --checkpoint-dir's policy.json)."""
    if os.path.isdir(path):
        path = os.path.join(path, "policy.json")
    with open(path) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"gyre.rl.load_policy: {path} is not a {FORMAT} policy file")
    net = _mlp(meta["observations"], meta["outputs"], meta["hidden"])
    weights = np.asarray(meta["weights"], dtype=np.float32)
    if weights.size != sum(p.numel() for p in net.parameters()):
        raise ValueError(f"gyre.rl.load_policy: {path} holds {weights.size} weights for a network of "
                         f"{sum(p.numel() for p in net.parameters())}")
    load_flat(net, weights)
    return Policy({k: v for k, v in meta.items() if k != "weights"}, net)


def write_policy(path, algorithm, env, observations, actions, hidden, net, env_steps=0, updates=0):
    meta = {"format": FORMAT, "algo": _NAMES.get(algorithm, algorithm.lower()), "env": env,
            "observations": observations, "actions": actions, "outputs": actions + 1, "hidden": hidden,
            "env_steps": env_steps, "updates": updates, "weights": [float(w) for w in flat_weights(net)]}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(meta, f)
    os.replace(tmp, path)
    return path
