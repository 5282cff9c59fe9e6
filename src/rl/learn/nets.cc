#include "rl/learn/nets.h"

#include <cstring>
#include <string>

#include "gyre/errors.h"

namespace gyre::rl {

::torch::nn::Sequential makeMlp(int observations, int outputs, int hidden) {
  return ::torch::nn::Sequential(::torch::nn::Linear(observations, hidden), ::torch::nn::ReLU(),
                                 ::torch::nn::Linear(hidden, hidden), ::torch::nn::ReLU(),
                                 ::torch::nn::Linear(hidden, outputs));
}

std::vector<float> flatWeights(::torch::nn::Module& net) {
  std::vector<float> out;
  for (const ::torch::Tensor& p : net.parameters()) {
    const ::torch::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

void loadWeights(::torch::nn::Module& net, const std::vector<float>& weights) {
  std::size_t total = 0;
  for (const ::torch::Tensor& p : net.parameters()) total += static_cast<std::size_t>(p.numel());
  if (total != weights.size())
    throw InvalidArgument("weights of " + std::to_string(weights.size()) + " values for a network of " +
                          std::to_string(total));
  ::torch::NoGradGuard noGrad;
  std::size_t at = 0;
  for (::torch::Tensor& p : net.parameters()) {
    std::memcpy(p.data_ptr<float>(), weights.data() + at,
                static_cast<std::size_t>(p.numel()) * sizeof(float));
    at += static_cast<std::size_t>(p.numel());
  }
}

int greedyAction(::torch::nn::Sequential& net, const std::vector<float>& observation, int actions) {
  ::torch::NoGradGuard noGrad;
  const ::torch::Tensor x =
      ::torch::from_blob(const_cast<float*>(observation.data()), {static_cast<long>(observation.size())});
  return static_cast<int>(net->forward(x).slice(0, 0, actions).argmax().item<std::int64_t>());
}

}  // namespace gyre::rl
