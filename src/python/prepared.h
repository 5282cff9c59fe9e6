// gyre._C's collectives on torch tensors, prepared: each prepare* function makes the output a
// caller gets and the call itself on the core's buffers, which runNow then runs. The checks a caller's own arguments fail (dtype, device, contiguity, root,
// splits) are separate functions, run before the ranks coordinate (coordination.h), so that a
// refused call can tell the others; the prepare functions assume them passed.
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::python {

struct Prepared {
  at::Tensor output;
  std::vector<at::Tensor> keep;  // what the core reads or writes, alive until it finishes
  std::function<std::shared_ptr<Work>(Communicator&, bool async)> run;
  double postscale = 1.0;
};

// Multiplies `t` by `factor` in place. Integer tensors as Horovod's: the product in float64,
// truncated toward zero.
void scaleInPlace(const at::Tensor& t, double factor);

// Runs `p`, blocking, and returns its output.
at::Tensor runNow(Communicator& comm, Prepared p);

// ValueError naming `call` unless 0 <= root < comm.size().
void checkRoot(int root, const Communicator& comm, const char* call);
// ValueError naming `call` for a 0-d tensor (reducescatter and alltoall split dimension 0).
void checkHasRows(const at::Tensor& tensor, const char* call);
// alltoall's splits, checked against the tensor's rows and the world (equal shares when empty).
std::vector<std::int64_t> checkedSplits(const at::Tensor& tensor, std::vector<std::int64_t> splits, int world,
                                        const char* call);

// allreduce, out of place unless `inPlace`; prescale multiplies the input first (into a copy when
// out of place), postscale the output.
Prepared prepareAllreduce(const at::Tensor& tensor, ReduceOp op, double prescale, double postscale, bool inPlace);
Prepared prepareBroadcast(const at::Tensor& tensor, int root, bool inPlace);
// allgather along dimension 0: `rows[r]` rows of `rowElements` elements from rank r (from the
// ranks' descriptors); the output has this tensor's other dimensions.
Prepared prepareAllgather(const at::Tensor& tensor, const std::vector<std::int64_t>& rows, std::int64_t rowElements);
// reducescatter along dimension 0, as Horovod's: with R rows and W ranks, rank r gets R / W rows,
// and the first R % W ranks one more.
Prepared prepareReduceScatter(const at::Tensor& tensor, ReduceOp op, const Communicator& comm);
// alltoall along dimension 0 with checked splits: the counts travel first, in a small blocking
// alltoall. Returns the call and the rows received from each rank.
std::pair<Prepared, at::Tensor> prepareAlltoall(const at::Tensor& tensor, const std::vector<std::int64_t>& splits,
                                                Communicator& comm, const char* call);

}  // namespace gyre::python
