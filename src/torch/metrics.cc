#include "gyre/torch/metrics.h"

#include "common/check.h"

namespace gyre::torch {

std::vector<double> allreduceMetrics(Communicator& comm, const std::vector<double>& values, double weight) {
  // Sum of weight * value and of the weights in one allreduce.
  std::vector<double> buffer;
  buffer.reserve(values.size() + 1);
  for (double v : values) buffer.push_back(v * weight);
  buffer.push_back(weight);
  comm.allreduce(buffer.data(), buffer.data(), buffer.size(), {DataType::kFloat64, ReduceOp::kSum});
  const double total = buffer.back();
  GYRE_USAGE_CHECK(total != 0, "allreduceMetrics: the ranks' weights sum to zero");
  buffer.pop_back();
  for (double& v : buffer) v /= total;
  return buffer;
}

std::map<std::string, double> allreduceMetrics(Communicator& comm, const std::map<std::string, double>& values) {
  std::vector<double> flat;
  for (const auto& [name, value] : values) flat.push_back(value);
  flat = allreduceMetrics(comm, flat);
  std::map<std::string, double> out;
  std::size_t i = 0;
  for (const auto& [name, value] : values) out[name] = flat[i++];
  return out;
}

}  // namespace gyre::torch
