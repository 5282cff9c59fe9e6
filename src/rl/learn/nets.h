// The networks of gyre::rl's learners: an MLP from an observation to its outputs (a Q-value per
// action for DQN; the policy's logits per action and then the value for IMPALA), and its weights
// as one flat vector, the form in which they travel to the actors.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace gyre::rl {

// observations → hidden → hidden → outputs, ReLU between.
::torch::nn::Sequential makeMlp(int observations, int outputs, int hidden);

// Every parameter, in order, flattened into one vector; loadWeights reads it back (InvalidArgument
// for a vector of another length).
std::vector<float> flatWeights(::torch::nn::Module& net);
void loadWeights(::torch::nn::Module& net, const std::vector<float>& weights);

// argmax over the first `actions` outputs of net(observation): the greedy action of a Q-network
// or of a policy's logits.
int greedyAction(::torch::nn::Sequential& net, const std::vector<float>& observation, int actions);

}  // namespace gyre::rl
