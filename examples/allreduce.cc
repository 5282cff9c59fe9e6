// The communication core alone (no libtorch): every rank contributes its rank to a vector, the
// allreduce averages them, and each rank checks the result.
//
//   gyre run -np 4 -- ./gyre_example_allreduce
//
// Built in this tree (build/bin/) and, against an installed gyre, by examples/CMakeLists.txt
// with find_package(gyre) or by hand with pkg-config (docs/install.md).
#include <gyre/gyre.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

int main() {
  try {
    // Rank, world size, store and secret come from the launcher's environment (gyre run,
    // mpirun, srun or torchrun).
    auto comm = gyre::init();
    std::vector<float> grad(1 << 20, static_cast<float>(comm->rank()));
    comm->allreduce(grad.data(), grad.data(), grad.size(), {gyre::DataType::kFloat32, gyre::ReduceOp::kAverage});
    const float expected = static_cast<float>(comm->size() - 1) / 2;  // the mean of 0 .. size-1
    for (float v : grad) {
      if (std::fabs(v - expected) > 1e-6f) {
        std::fprintf(stderr, "rank %d: allreduce gave %g, expected %g\n", comm->rank(), v, expected);
        return 1;
      }
    }
    std::printf("rank %d of %d: allreduce ok (average %g)\n", comm->rank(), comm->size(), expected);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gyre_example_allreduce: %s\n", e.what());
    return 1;
  }
}
