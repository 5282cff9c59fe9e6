"""gyre.rl's algorithms in RLlib's shape: a config (PPOConfig, IMPALAConfig) whose build() gives an
Algorithm with train(), save(), restore(), compute_single_action() and stop(). Rollout workers are
gyre.rt actors, one per worker process, each stepping its own environment (any class with
Gymnasium's reset/step API); the learner runs in this process on their unrolls."""
import collections
import copy
import os
import time

import numpy as np
import torch

import gyre.rt as rt

from . import envs
from ._policy import RolloutWorker, flat_weights, load_flat, make_net, space_sizes

_Worker = rt.remote(RolloutWorker)


def _creator(env):
    if env is None:
        raise ValueError("gyre.rl: no environment: config.environment(env=...) with a class or a function of "
                         "env_config, or \"CartPole-v1\"")
    if isinstance(env, str):
        if env in ("CartPole-v1", "CartPole", "cartpole"):
            return envs.CartPole
        raise ValueError(f"gyre.rl: unknown environment {env!r}: pass a class or a function of env_config "
                         "(\"CartPole-v1\" is built in)")
    if not callable(env):
        raise TypeError(f"gyre.rl: env must be a class, a function of env_config, or a name, not {type(env).__name__}")
    return env


class AlgorithmConfig:
    """RLlib's builder: config.environment(...).env_runners(...).training(...).debugging(...)."""
    _common = {"lr": 1e-3, "gamma": 0.99, "hidden": 128, "entropy_coeff": 0.01, "vf_loss_coeff": 0.5,
               "grad_clip": 0.5, "train_batch_size": 1024}

    def __init__(self, algo_class, own):
        self.algo_class = algo_class
        self.env, self.env_config = None, {}
        self.num_rollout_workers, self.rollout_fragment_length = 2, 128
        self.seed, self.max_restarts = 1, 10
        self._training = dict(self._common, **own)

    def environment(self, env=None, env_config=None):
        self.env = env if env is not None else self.env
        self.env_config = dict(env_config or self.env_config)
        return self

    def env_runners(self, num_env_runners=None, rollout_fragment_length=None):
        if num_env_runners is not None:
            if num_env_runners < 1:
                raise ValueError("gyre.rl: num_env_runners must be at least 1 (the workers step the environments)")
            self.num_rollout_workers = int(num_env_runners)
        if rollout_fragment_length is not None:
            self.rollout_fragment_length = int(rollout_fragment_length)
        return self

    def rollouts(self, num_rollout_workers=None, rollout_fragment_length=None):
        return self.env_runners(num_rollout_workers, rollout_fragment_length)

    def training(self, **options):
        unknown = set(options) - set(self._training)
        if unknown:
            raise TypeError(f"gyre.rl: {self.algo_class.__name__} has no training option(s) {sorted(unknown)} "
                            f"(it takes {sorted(self._training)})")
        self._training.update(options)
        return self

    def debugging(self, seed=None):
        if seed is not None:
            self.seed = int(seed)
        return self

    def fault_tolerance(self, max_num_worker_restarts=None):
        if max_num_worker_restarts is not None:
            self.max_restarts = int(max_num_worker_restarts)
        return self

    def copy(self):
        return copy.deepcopy(self)

    def build(self):
        return self.algo_class(self)

    def __getattr__(self, name):
        training = self.__dict__.get("_training", {})
        if name in training:
            return training[name]
        raise AttributeError(name)


class Algorithm:
    """The learner and its rollout workers. train() runs one iteration (one batch of
    train_batch_size steps, one update) and returns RLlib's result keys."""

    def __init__(self, config):
        self.config = config.copy()
        c = self.config
        self._creator = _creator(c.env)
        probe = self._creator(c.env_config)
        self.observations, self.actions = space_sizes(probe)
        torch.manual_seed(c.seed)
        self.net = make_net(self.observations, self.actions, c.hidden)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=c.lr, eps=1e-5)
        if not rt.is_initialized():
            rt.init(num_workers=c.num_rollout_workers)
        self._version = 0
        self._weights = rt.put(flat_weights(self.net))
        worker = _Worker.options(max_restarts=c.max_restarts, max_task_retries=1)
        self.workers = [worker.remote(self._creator, c.env_config, i, c.seed, c.hidden)
                        for i in range(c.num_rollout_workers)]
        self._evaluator = worker.remote(self._creator, c.env_config, 10_000, c.seed, c.hidden)
        self._in_flight = {}
        self._evaluating = None
        self.iteration, self.timesteps, self.episodes = 0, 0, 0
        self._returns = collections.deque(maxlen=100)
        self._greedy = collections.deque(maxlen=100)
        self._start = time.monotonic()

    # The samples of one iteration: at least train_batch_size steps, unrolled by the workers with
    # the newest weights they were given (at most one batch ahead of the learner).
    def _collect(self):
        need = self.config.train_batch_size
        batch, steps = [], 0
        while steps < need:
            for w in self.workers:
                if w not in self._in_flight and steps + len(self._in_flight) * self.config.rollout_fragment_length < need:
                    self._in_flight[w] = w.sample.remote(self._weights, self._version, self.config.rollout_fragment_length)
            ready, _ = rt.wait(list(self._in_flight.values()), num_returns=1)
            for w, ref in list(self._in_flight.items()):
                if ref in ready:
                    del self._in_flight[w]
                    unroll = rt.get(ref)
                    batch.append(unroll)
                    steps += len(unroll["actions"])
                    self._returns.extend(unroll["episode_returns"])
                    self.episodes += len(unroll["episode_returns"])
        self.timesteps += steps
        return batch

    def _publish(self):
        self._version += 1
        self._weights = rt.put(flat_weights(self.net))

    def _evaluate(self):
        """Greedy episodes on the evaluator, one at a time beside the training."""
        if self._evaluating is not None and self._evaluating.ready():
            self._greedy.extend(rt.get(self._evaluating))
            self._evaluating = None
        if self._evaluating is None:
            self._evaluating = self._evaluator.evaluate.remote(self._weights, self._version, 5)

    def train(self):
        batch = self._collect()
        stats = self._update(batch)
        self._publish()
        self._evaluate()
        self.iteration += 1
        mean = float(np.mean(self._returns)) if self._returns else float("nan")
        greedy = float(np.mean(self._greedy)) if self._greedy else float("nan")
        return {"training_iteration": self.iteration, "timesteps_total": self.timesteps,
                "episodes_total": self.episodes, "episode_reward_mean": mean,
                "evaluation": {"episode_reward_mean": greedy, "episodes": len(self._greedy)},
                "time_total_s": time.monotonic() - self._start, "info": {"learner": stats}}

    def compute_single_action(self, observation, explore=False):
        with torch.no_grad():
            logits = self.net(torch.as_tensor(np.asarray(observation, dtype=np.float32)))[:self.actions]
        if not explore:
            return int(logits.argmax())
        return int(torch.distributions.Categorical(logits=logits).sample())

    def save(self, checkpoint_dir=None):
        """The network, the optimizer and the counters, in checkpoint_dir/algorithm.pt; returns the
        directory."""
        checkpoint_dir = checkpoint_dir or os.path.join(os.getcwd(), f"checkpoint-{self.iteration}")
        os.makedirs(checkpoint_dir, exist_ok=True)
        path = os.path.join(checkpoint_dir, "algorithm.pt")
        torch.save({"algorithm": type(self).__name__, "net": self.net.state_dict(),
                    "optimizer": self.optimizer.state_dict(), "iteration": self.iteration,
                    "timesteps": self.timesteps, "episodes": self.episodes,
                    "shape": (self.observations, self.actions, self.config.hidden)}, path + ".tmp")
        os.replace(path + ".tmp", path)
        return checkpoint_dir

    def restore(self, checkpoint_dir):
        saved = torch.load(os.path.join(checkpoint_dir, "algorithm.pt"))
        if saved["shape"] != (self.observations, self.actions, self.config.hidden):
            raise ValueError(f"gyre.rl: the checkpoint's network {saved['shape']} is not this algorithm's "
                             f"{(self.observations, self.actions, self.config.hidden)}")
        self.net.load_state_dict(saved["net"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.iteration, self.timesteps, self.episodes = saved["iteration"], saved["timesteps"], saved["episodes"]
        self._publish()

    def export_policy(self, path):
        """The policy: PATH.json a gyre policy file (gyre.rl.load_policy, gyre rl --resume; the
        environment named by its config's env string), anything else TorchScript (observation ->
        logits and value)."""
        if path.endswith(".json"):
            from ._policy_file import write_policy
            env = self.config.env if isinstance(self.config.env, str) else getattr(self.config.env, "__name__", "")
            env = {"CartPole-v1": "cartpole", "CartPole": "cartpole"}.get(env, env)
            return write_policy(path, type(self).__name__, env, self.observations, self.actions, self.config.hidden,
                                self.net, self.timesteps, self.iteration)
        torch.jit.trace(self.net, torch.zeros(self.observations)).save(path)
        return path

    def stop(self):
        for w in self.workers + [self._evaluator]:
            try:
                rt.kill(w)
            except Exception:
                pass
        self.workers = []


def _stack(batch, key):
    return torch.from_numpy(np.stack([u[key] for u in batch]))
