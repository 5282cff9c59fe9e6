"""PPO and IMPALA's updates on the rollout workers' unrolls (the same rules as gyre rl's C++
learners, src/rl/learn/ppo.cc and impala.cc)."""
import torch

from ._algorithm import Algorithm, AlgorithmConfig, _stack


class PPO(Algorithm):
    """PPO (Schulman et al. 2017): GAE(lambda_) advantages from the values at the batch's start,
    normalized; num_sgd_iter passes in minibatches of sgd_minibatch_size on the clipped surrogate
    (clip_param), plus vf_loss_coeff x the value loss, minus entropy_coeff x the entropy."""

    def _update(self, batch):
        c, a = self.config, self.actions
        obs, logits_mu = _stack(batch, "obs"), _stack(batch, "logits")
        taken, rewards = _stack(batch, "actions"), _stack(batch, "rewards")
        not_done = 1 - _stack(batch, "dones")
        b, t = taken.shape
        with torch.no_grad():
            values = self.net(obs)[..., a]
            adv = torch.zeros_like(rewards)
            nxt = torch.zeros(b)
            for s in reversed(range(t)):
                delta = rewards[:, s] + c.gamma * not_done[:, s] * values[:, s + 1] - values[:, s]
                nxt = delta + c.gamma * c.lambda_ * not_done[:, s] * nxt
                adv[:, s] = nxt
            returns = (adv + values[:, :t]).reshape(-1)
        n = b * t
        flat_obs = obs[:, :t].reshape(n, -1)
        flat_taken = taken.reshape(n, 1)
        old_logp = torch.log_softmax(logits_mu.reshape(n, a), 1).gather(1, flat_taken).squeeze(1)
        adv = adv.reshape(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        size = min(c.sgd_minibatch_size, n)
        stats = {}
        for _ in range(c.num_sgd_iter):
            order = torch.randperm(n)
            for start in range(0, n - size + 1, size):
                idx = order[start:start + size]
                out = self.net(flat_obs[idx])
                logp = torch.log_softmax(out[:, :a], 1)
                ratio = (logp.gather(1, flat_taken[idx]).squeeze(1) - old_logp[idx]).exp()
                surrogate = torch.min(ratio * adv[idx], ratio.clamp(1 - c.clip_param, 1 + c.clip_param) * adv[idx])
                value_loss = 0.5 * (out[:, a] - returns[idx]).pow(2).mean()
                entropy = -(logp.exp() * logp).sum(1).mean()
                loss = -surrogate.mean() + c.vf_loss_coeff * value_loss - c.entropy_coeff * entropy
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), c.grad_clip)
                self.optimizer.step()
                stats = {"total_loss": float(loss), "vf_loss": float(value_loss), "entropy": float(entropy)}
        return stats


class PPOConfig(AlgorithmConfig):
    def __init__(self):
        super().__init__(PPO, {"lambda_": 0.95, "clip_param": 0.2, "num_sgd_iter": 4, "sgd_minibatch_size": 256})


class IMPALA(Algorithm):
    """IMPALA (Espeholt et al. 2018): one actor-critic step per batch, V-trace correcting for the
    workers' older policy (rho and c clipped at vtrace_clip_rho_threshold, vtrace_clip_c_threshold)."""

    def _update(self, batch):
        c, a = self.config, self.actions
        obs, logits_mu = _stack(batch, "obs"), _stack(batch, "logits")
        taken, rewards = _stack(batch, "actions").unsqueeze(2), _stack(batch, "rewards")
        discounts = c.gamma * (1 - _stack(batch, "dones"))
        t = rewards.shape[1]
        out = self.net(obs)
        logp = torch.log_softmax(out[:, :t, :a], 2)
        values = out[..., a]
        taken_logp = logp.gather(2, taken).squeeze(2)
        behaviour = torch.log_softmax(logits_mu, 2).gather(2, taken).squeeze(2)
        with torch.no_grad():
            ratio = (taken_logp - behaviour).exp()
            rho = ratio.clamp(max=c.vtrace_clip_rho_threshold)
            cs = ratio.clamp(max=c.vtrace_clip_c_threshold)
            v = values.detach()
            deltas = rho * (rewards + discounts * v[:, 1:] - v[:, :t])
            acc = torch.zeros_like(v[:, 0])
            vs_minus_v = torch.zeros_like(rewards)
            for s in reversed(range(t)):
                acc = deltas[:, s] + discounts[:, s] * cs[:, s] * acc
                vs_minus_v[:, s] = acc
            vs = vs_minus_v + v[:, :t]
            vs_next = torch.cat([vs[:, 1:], v[:, t:]], 1)
            pg_adv = rho * (rewards + discounts * vs_next - v[:, :t])
        policy_loss = -(taken_logp * pg_adv).sum()
        value_loss = 0.5 * (vs - values[:, :t]).pow(2).sum()
        entropy = -(logp.exp() * logp).sum()
        loss = policy_loss + c.vf_loss_coeff * value_loss - c.entropy_coeff * entropy
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), c.grad_clip)
        self.optimizer.step()
        return {"total_loss": float(loss), "vf_loss": float(value_loss), "entropy": float(entropy)}


class IMPALAConfig(AlgorithmConfig):
    def __init__(self):
        super().__init__(IMPALA, {"vtrace_clip_rho_threshold": 1.0, "vtrace_clip_c_threshold": 1.0, "grad_clip": 40.0,
                                  "train_batch_size": 400})
        self.rollout_fragment_length = 50
