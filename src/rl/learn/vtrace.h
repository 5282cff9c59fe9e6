// V-trace (Espeholt et al. 2018, section 4.1): the off-policy targets of IMPALA's value function
// and the advantages of its policy gradient, from trajectories of a behaviour policy μ.
#pragma once

#include <torch/torch.h>

namespace gyre::rl {

struct VTrace {
  ::torch::Tensor vs;          // [B, T]: the value targets v_s
  ::torch::Tensor advantages;  // [B, T]: ρ_s (r_s + γ_s v_(s+1) − V(x_s)), v_T = V(x_T)
};

// rewards, discounts (γ, or 0 where an episode ended) and logRatios (log π(a|x) − log μ(a|x)) are
// [B, T]; values [B, T + 1], the last the bootstrap. ρ_t = min(ρ̄, π/μ), c_t = min(c̄, π/μ);
// v_s = V(x_s) + Σ_(t≥s) (Π_(i<t) γ_i) (Π_(s≤i<t) c_i) ρ_t δ_t, with
// δ_t = r_t + γ_t V(x_(t+1)) − V(x_t), computed backwards. No gradient flows through the result.
VTrace vtrace(const ::torch::Tensor& rewards, const ::torch::Tensor& discounts, const ::torch::Tensor& values,
              const ::torch::Tensor& logRatios, double rhoBar, double cBar);

}  // namespace gyre::rl
