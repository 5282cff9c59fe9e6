"""Environments with Gymnasium's API in plain Python (no Gymnasium needed): reset(seed=None) ->
(observation, info), step(action) -> (observation, reward, terminated, truncated, info), and
action_space.n / observation_space.shape. CartPole-v1 from its published equations, as gyre's C++
one (include/gyre/rl/env.h)."""
import math
import random

import numpy as np

__all__ = ["Discrete", "Box", "CartPole"]


class Discrete:
    def __init__(self, n):
        self.n = int(n)

    def sample(self, rng=random):
        return rng.randrange(self.n)


class Box:
    def __init__(self, low, high, shape, dtype=np.float32):
        self.low, self.high, self.shape, self.dtype = low, high, tuple(shape), dtype


class CartPole:
    """CartPole-v1: a pole on a cart; +1 a step while it stays up, terminated beyond 12 degrees or
    2.4 units, truncated at 500 steps."""
    gravity, cart_mass, pole_mass, length, force, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_limit, x_limit, max_steps = 12 * 2 * math.pi / 360, 2.4, 500

    def __init__(self, config=None):
        self.action_space = Discrete(2)
        self.observation_space = Box(-np.inf, np.inf, (4,))
        self._rng = random.Random()
        self._state, self._steps = None, 0

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng.seed(seed)
        self._state = [self._rng.uniform(-0.05, 0.05) for _ in range(4)]
        self._steps = 0
        return np.array(self._state, dtype=np.float32), {}

    def step(self, action):
        if self._state is None:
            raise RuntimeError("CartPole.step before reset()")
        x, x_dot, theta, theta_dot = self._state
        force = self.force if action == 1 else -self.force
        cos, sin = math.cos(theta), math.sin(theta)
        total = self.cart_mass + self.pole_mass
        pole_moment = self.pole_mass * self.length
        temp = (force + pole_moment * theta_dot ** 2 * sin) / total
        theta_acc = (self.gravity * sin - cos * temp) / (self.length * (4.0 / 3.0 - self.pole_mass * cos ** 2 / total))
        x_acc = temp - pole_moment * theta_acc * cos / total
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * x_acc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * theta_acc
        self._state = [x, x_dot, theta, theta_dot]
        self._steps += 1
        terminated = abs(x) > self.x_limit or abs(theta) > self.theta_limit
        truncated = not terminated and self._steps >= self.max_steps
        return np.array(self._state, dtype=np.float32), 1.0, terminated, truncated, {}
