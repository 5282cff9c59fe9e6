#include "rl/learn/vtrace.h"

namespace gyre::rl {

VTrace vtrace(const ::torch::Tensor& rewards, const ::torch::Tensor& discounts, const ::torch::Tensor& values,
              const ::torch::Tensor& logRatios, double rhoBar, double cBar) {
  ::torch::NoGradGuard noGrad;
  const long t = rewards.size(1);
  const ::torch::Tensor ratio = logRatios.exp();
  const ::torch::Tensor rho = ratio.clamp_max(rhoBar);
  const ::torch::Tensor c = ratio.clamp_max(cBar);
  const ::torch::Tensor v = values.detach();
  VTrace out;
  out.vs = ::torch::zeros_like(rewards);
  ::torch::Tensor acc = ::torch::zeros({rewards.size(0)}, rewards.options());  // v_(s+1) − V(x_(s+1))
  for (long s = t - 1; s >= 0; --s) {
    const ::torch::Tensor delta =
        rho.select(1, s) *
        (rewards.select(1, s) + discounts.select(1, s) * v.select(1, s + 1) - v.select(1, s));
    acc = delta + discounts.select(1, s) * c.select(1, s) * acc;
    out.vs.select(1, s).copy_(v.select(1, s) + acc);
  }
  const ::torch::Tensor vsNext = ::torch::cat({out.vs.slice(1, 1, t), v.slice(1, t, t + 1)}, 1);
  out.advantages = rho * (rewards + discounts * vsNext - v.slice(1, 0, t));
  return out;
}

}  // namespace gyre::rl
