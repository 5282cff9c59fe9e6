"""The driver side of tests/python/test_rl.py: gyre.rl's algorithms (RLlib's shape) on Python
environments. `python3 rl_workers.py CASE DIR`; prints "CASE ok" at the end."""
import os
import signal
import sys

import numpy as np
import torch

from gyre import rl
from workers import expect_error


class Corridor:
    """Ten steps; action 1 earns 1, action 0 nothing: the best return is 10."""

    def __init__(self, config):
        self.action_space = rl.envs.Discrete(2)
        self.observation_space = rl.envs.Box(0, 1, (2,))
        self.length = config.get("length", 10)
        self.t = 0

    def reset(self, seed=None, options=None):
        self.t = 0
        return np.array([0.0, 1.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([self.t / self.length, 1.0], dtype=np.float32)
        return obs, float(action == 1), False, self.t >= self.length, {}


def case_learns(root):
    for config in (rl.PPOConfig().training(train_batch_size=512, lr=3e-3),
                   rl.IMPALAConfig().training(lr=3e-3)):
        algo = config.environment(Corridor, env_config={"length": 10}).env_runners(num_env_runners=2,
                                                                                   rollout_fragment_length=64).build()
        for _ in range(40):
            result = algo.train()
        assert set(result) >= {"training_iteration", "timesteps_total", "episode_reward_mean", "evaluation"}
        assert result["training_iteration"] == 40 and result["timesteps_total"] >= 40 * 64
        assert result["episode_reward_mean"] > 8.5, (type(algo).__name__, result["episode_reward_mean"])
        assert all(algo.compute_single_action(np.array([k / 10, 1.0], dtype=np.float32)) == 1 for k in range(10))
        algo.stop()
    print("learns ok", flush=True)


def case_cartpole_checkpoints(root):
    algo = rl.PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).debugging(seed=3).build()
    first = algo.train()["episode_reward_mean"]
    # 25 iterations: the mean of the last 100 episodes is 91-100 here (44-54 after 15, too close to
    # a bound for a loaded CI machine, whose rollouts arrive in another order)
    for _ in range(24):
        result = algo.train()
    assert result["episode_reward_mean"] > max(2 * first, 50), (first, result["episode_reward_mean"])
    path = algo.save(os.path.join(root, "ppo"))
    probe = np.array([0.01, -0.2, 0.03, 0.1], dtype=np.float32)
    again = rl.PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).build()
    again.restore(path)
    assert again.iteration == 25 and again.compute_single_action(probe) == algo.compute_single_action(probe)
    for p, q in zip(algo.net.parameters(), again.net.parameters()):
        assert torch.equal(p, q)
    exported = torch.jit.load(algo.export_policy(os.path.join(root, "policy.pt")))
    assert torch.allclose(exported(torch.from_numpy(probe)), algo.net(torch.from_numpy(probe)))
    # a rollout worker's process killed: the worker is rebuilt and training goes on
    import gyre.rt as rt
    os.kill(rt._state.worker_processes[0].pid, signal.SIGKILL)
    for _ in range(3):
        after = algo.train()
    assert after["training_iteration"] == 28
    # a gyre policy file: written here, loaded back, and taken by gyre rl --resume (C++)
    policy_file = algo.export_policy(os.path.join(root, "policy.json"))
    loaded = rl.load_policy(policy_file)
    assert loaded.meta["algo"] == "ppo" and loaded.meta["env"] == "cartpole"
    assert loaded.compute_single_action(probe) == algo.compute_single_action(probe)
    gyre_tool = os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[0], "..", "bin", "gyre")
    import subprocess
    p = subprocess.run([gyre_tool, "rl", "--algo", "ppo", "--max-env-steps", "512", "--resume", policy_file,
                        "--export", os.path.join(root, "again.json"), "--run-dir", os.path.join(root, "run")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "resumed from" in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert rl.load_policy(os.path.join(root, "again.json")).meta["env_steps"] >= 512
    expect_error(TypeError, ["no training option(s) ['bogus']"], rl.PPOConfig().training, bogus=1)
    expect_error(ValueError, ["unknown environment 'Pong'"], rl.PPOConfig().environment("Pong").build)
    print("cartpole_checkpoints ok", flush=True)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]](sys.argv[2])
