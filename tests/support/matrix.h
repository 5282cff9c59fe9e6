// The correctness matrix of every collective through the public API, against a serial
// reference: op × algorithm × dtype × count × in place/out of place. Inputs are small integers,
// so every floating-point sum is exact whatever the order of reduction, and results are compared
// bit for bit (average: the reference divides the exact sum the way the kernels do).
#pragma once

#include <cstddef>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::test {

struct MatrixOptions {
  // Counts run for every dtype and op.
  std::vector<std::size_t> smallCounts{0, 1, 7, 1023};
  // Counts run for float32 and float16 with sum and max (every algorithm, both layouts).
  std::vector<std::size_t> largeCounts{(1u << 20) + 3};
};

// The default matrix, shrunk when GYRE_TEST_QUICK=1 (sanitizer builds).
MatrixOptions defaultMatrix();

// Runs on every rank of `comm`; reports mismatches through gtest.
void checkAllreduce(Communicator& comm, const MatrixOptions& m);
void checkRootedAndGatherCollectives(Communicator& comm, const MatrixOptions& m);
void checkPointToPoint(Communicator& comm);

}  // namespace gyre::test
