// Comparisons of parameter lists for the libtorch tests.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

namespace gyre::test {

// The largest absolute difference between two tensors of one shape.
inline double maxDiff(const ::torch::Tensor& a, const ::torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Every tensor of `got` within `tol` (max absolute difference) of the same one in `want`;
// `who` names the rank or worker in failures.
inline void expectClose(const std::vector<::torch::Tensor>& got, const std::vector<::torch::Tensor>& want, double tol,
                        const std::string& who) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = maxDiff(got[i], want[i]);
    EXPECT_LE(diff, tol) << who << " parameter " << i;
  }
}

}  // namespace gyre::test
