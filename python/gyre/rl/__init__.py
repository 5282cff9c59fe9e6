"""gyre.rl: RLlib's shape for Python environments, on gyre.rt's actors (docs/rl.md).

    from gyre import rl
    config = rl.PPOConfig().environment(MyEnv, env_config={...}).env_runners(num_env_runners=2)
    algo = config.build()
    for _ in range(100):
        result = algo.train()
        if result["evaluation"]["episode_reward_mean"] >= 475:
            break
    algo.save("checkpoints/ppo")

An environment is any class (or function of env_config) with Gymnasium's reset/step API and a
discrete action space; gyre.rl.envs.CartPole is one, in plain Python."""
from . import envs
from ._algorithm import Algorithm, AlgorithmConfig
from ._learners import IMPALA, PPO, IMPALAConfig, PPOConfig
from ._policy_file import Policy, load_policy

__all__ = ["envs", "Algorithm", "AlgorithmConfig", "PPO", "PPOConfig", "IMPALA", "IMPALAConfig", "Policy",
           "load_policy"]
