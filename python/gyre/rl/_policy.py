"""The actor-critic network of gyre.rl's algorithms and the rollout worker (a gyre.rt actor) that
unrolls it in its own environment."""
import numpy as np
import torch


def make_net(observations, actions, hidden):
    """Two hidden layers of `hidden` ReLU units; outputs the policy's logits, then the value."""
    return torch.nn.Sequential(torch.nn.Linear(observations, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, actions + 1))


def flat_weights(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).numpy().copy()


def load_flat(net, flat):
    with torch.no_grad():
        offset = 0
        for p in net.parameters():
            n = p.numel()
            p.copy_(torch.from_numpy(np.asarray(flat[offset:offset + n])).view_as(p))
            offset += n


def space_sizes(env):
    actions = getattr(getattr(env, "action_space", None), "n", None)
    shape = getattr(getattr(env, "observation_space", None), "shape", None)
    if actions is None or shape is None or len(shape) != 1:
        raise TypeError("gyre.rl: the environment needs a discrete action_space (.n) and a flat observation_space "
                        "(.shape of one dimension), as Gymnasium's")
    return int(shape[0]), int(actions)


class RolloutWorker:
    """Steps its own environment with the newest weights it is given (fetched when their version
    changes), sampling each action from softmax(logits), and sends back the unroll."""

    def __init__(self, env_creator, env_config, index, seed, hidden):
        torch.set_num_threads(1)
        self.env = env_creator(env_config)
        self.observations, self.actions = space_sizes(self.env)
        self.net = make_net(self.observations, self.actions, hidden)
        self.version = -1
        self.rng = np.random.default_rng(seed * 6151 + index)
        self.episode_seed = seed * 1000003 + index * 7919
        self.obs, self.episode_return = None, 0.0

    def _reset(self):
        self.episode_seed += 1
        obs, _ = self.env.reset(seed=self.episode_seed)
        return np.asarray(obs, dtype=np.float32)

    def sample(self, weights, version, steps, greedy=False):
        if version != self.version:
            load_flat(self.net, weights)
            self.version = version
        if self.obs is None:
            self.obs = self._reset()
        obs = np.empty((steps + 1, self.observations), dtype=np.float32)
        logits = np.empty((steps, self.actions), dtype=np.float32)
        taken = np.empty(steps, dtype=np.int64)
        rewards = np.empty(steps, dtype=np.float32)
        dones = np.empty(steps, dtype=np.float32)
        returns = []
        with torch.no_grad():
            for s in range(steps):
                obs[s] = self.obs
                out = self.net(torch.from_numpy(self.obs))[:self.actions].numpy()
                logits[s] = out
                if greedy:
                    action = int(out.argmax())
                else:
                    p = np.exp(out - out.max())
                    action = int(self.rng.choice(self.actions, p=p / p.sum()))
                next_obs, reward, terminated, truncated, _ = self.env.step(action)
                taken[s], rewards[s] = action, reward
                self.episode_return += reward
                done = terminated or truncated
                dones[s] = 1.0 if done else 0.0
                if done:
                    returns.append(self.episode_return)
                    self.episode_return = 0.0
                    self.obs = self._reset()
                else:
                    self.obs = np.asarray(next_obs, dtype=np.float32)
        obs[steps] = self.obs
        return {"obs": obs, "logits": logits, "actions": taken, "rewards": rewards, "dones": dones,
                "episode_returns": returns}

    def evaluate(self, weights, version, episodes=1):
        """Greedy episodes (argmax of the logits), each from a fresh reset; their returns."""
        self.obs, self.episode_return = None, 0.0
        returns = []
        while len(returns) < episodes:
            returns += self.sample(weights, version, 100, greedy=True)["episode_returns"]
        self.obs, self.episode_return = None, 0.0
        return returns[:episodes]
