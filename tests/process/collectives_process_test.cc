// The correctness matrix again, with ranks as real processes (shared memory between processes,
// and TCP), bootstrapped through a file store.
#include <gtest/gtest.h>

#include "gyre/gyre.h"
#include "support/matrix.h"
#include "support/ranks.h"

namespace gyre {
namespace {

class ProcessMatrixTest : public ::testing::TestWithParam<std::tuple<Transport, int>> {};

TEST_P(ProcessMatrixTest, EveryCollectiveMatchesTheSerialReference) {
  const auto transport = std::get<0>(GetParam());  // not a structured binding: the lambda captures it
  const int size = std::get<1>(GetParam());
  test::TempDir dir;
  const std::string path = dir.path() + "/store";
  test::runProcesses(size, [&](int rank) {
    CommunicatorOptions o;
    o.transport = transport;
    o.secret = "process-secret";
    auto comm = Communicator::create(createFileStore(path), rank, size, o);
    const auto matrix = test::defaultMatrix();
    test::checkAllreduce(*comm, matrix);
    test::checkRootedAndGatherCollectives(*comm, matrix);
    test::checkPointToPoint(*comm);
  });
}

INSTANTIATE_TEST_SUITE_P(Processes, ProcessMatrixTest,
                         ::testing::Combine(::testing::Values(Transport::kAuto, Transport::kTcp),
                                            ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8)),
                         [](const auto& param_info) {
                           return std::string(toString(std::get<0>(param_info.param))) + "_np" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace gyre
