// Averaging scalars such as loss and accuracy across ranks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::torch {

// Every rank passes the same names; every rank gets the mean over ranks (float64). Collective.
std::map<std::string, double> allreduceMetrics(Communicator& comm, const std::map<std::string, double>& values);
// The same for positional values. `weight` is this rank's weight in the mean (sum over ranks of
// weight * value, divided by the sum of the weights), e.g. the number of samples it evaluated.
std::vector<double> allreduceMetrics(Communicator& comm, const std::vector<double>& values,
                                     double weight = 1.0);

}  // namespace gyre::torch
