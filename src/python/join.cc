// gyre._C.join_round: one round of Horovod's hvd.join() on a rank with no data left (coordination.h):
// it announces that it has joined and takes part in what the other ranks call, with zeros (the
// identity of min, max and product) or nothing of its own.
#include <limits>
#include <string>
#include <vector>

#include "python/collectives.h"
#include "python/coordination.h"
#include "python/prepared.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// n elements of `type` that leave a reduction by `op` unchanged.
at::Tensor identity(at::IntArrayRef shape, at::ScalarType type, ReduceOp op) {
  const auto options = at::TensorOptions().dtype(type);
  if (op == ReduceOp::kProduct) return at::ones(shape, options);
  if (op != ReduceOp::kMin && op != ReduceOp::kMax) return at::zeros(shape, options);
  c10::Scalar value;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "gyre.join", [&] {
    using limits = std::numeric_limits<scalar_t>;
    if (op == ReduceOp::kMin)
      value = limits::has_infinity ? limits::infinity() : limits::max();
    else
      value = limits::has_infinity ? -limits::infinity() : limits::lowest();
  });
  return at::full(shape, value, options);
}

// The joined rank's part in the call the others make (`call`, the first active rank's).
void takePart(Communicator& comm, const CallDescriptor& call, const std::vector<CallDescriptor>& all) {
  const auto type = static_cast<at::ScalarType>(call.scalarType);
  const auto op = static_cast<ReduceOp>(call.op);
  switch (call.kind) {
    case CallKind::kAllreduce:
      runNow(comm, prepareAllreduce(identity({call.numel}, type, op), op, 1.0, 1.0, true));
      return;
    case CallKind::kReduceScatter:
      runNow(comm, prepareReduceScatter(identity({call.shape[0], call.rowElements}, type, op), op, comm));
      return;
    case CallKind::kBroadcast:
      runNow(comm, prepareBroadcast(at::empty({call.numel}, at::TensorOptions().dtype(type)), call.root, true));
      return;
    case CallKind::kAllgather: {
      std::vector<std::int64_t> rows;
      for (const CallDescriptor& d : all) rows.push_back(d.kind == CallKind::kJoin ? 0 : d.shape[0]);
      runNow(comm, prepareAllgather(at::empty({0, call.rowElements}, at::TensorOptions().dtype(type)), rows,
                                    call.rowElements));
      return;
    }
    case CallKind::kBarrier:
      comm.barrier();
      return;
    default:
      return;  // readJoinRound hands the others' other calls back, or skips them
  }
}

}  // namespace

void bindJoin(py::module_& m) {
  m.def(
      "join_round",
      [](bool first, std::uint64_t alive) {
        auto coordinator = World::coordinator(0, "join");
        JoinRound round;
        {
          py::gil_scoped_release release;
          coordinator->runInOrder([&] {
            Communicator& comm = coordinator->communicator();
            CallDescriptor mine = describeCall(CallKind::kJoin, "join");
            mine.root = first ? 1 : 0;
            mine.nameHash = alive;  // the DistributedOptimizers this rank still has, by index
            const auto all = exchange(comm, mine);
            round = readJoinRound(all);
            if (round.then == JoinRound::Then::kTakePart) takePart(comm, round.call, all);
          });
        }
        switch (round.then) {
          case JoinRound::Then::kDone: return py::make_tuple("done", round.lastJoined);
          case JoinRound::Then::kOptimizer: return py::make_tuple("optimizer", round.optimizer);
          default: return py::make_tuple("continue", -1);
        }
      },
      "One round of join() on a rank with no data left (`alive`: a bit per DistributedOptimizer index it "
      "still has): ('done', last rank to join), ('optimizer', the DistributedOptimizer whose reduction to "
      "take part in), or ('continue', -1).",
      py::arg("first"), py::arg("alive") = 0);
}

}  // namespace gyre::python
