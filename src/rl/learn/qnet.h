// The Q-network of gyre::rl's DQN learners: an MLP from an observation to one value per action,
// and its weights as one flat vector, the form in which they travel to the actors.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace gyre::rl {

// observations → hidden → hidden → actions, ReLU between.
::torch::nn::Sequential makeQNet(int observations, int actions, int hidden);

// Every parameter, in order, flattened into one vector; loadWeights reads it back (InvalidArgument
// for a vector of another length).
std::vector<float> flatWeights(::torch::nn::Module& net);
void loadWeights(::torch::nn::Module& net, const std::vector<float>& weights);

// argmax_a Q(observation, a).
int greedyAction(::torch::nn::Sequential& q, const std::vector<float>& observation);

}  // namespace gyre::rl
