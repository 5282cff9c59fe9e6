// gyre._C's collectives on torch tensors: each call checks its tensors, prepares its output and
// runs the core's collective, blocking (the GIL released) or asynchronously (a Handle).
#include "python/collectives.h"

#include <torch/csrc/utils/tensor_dtypes.h>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "python/tensors.h"
#include "python/world.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

// One collective, prepared: the output a caller gets, the tensors the core reads or writes
// (kept alive until it finishes), and the call itself, blocking or returning its Work.
struct Prepared {
  at::Tensor output;
  std::vector<at::Tensor> keep;
  std::function<std::shared_ptr<Work>(Communicator&, bool async)> run;
  double postscale = 1.0;
};

// Multiplies `t` by `factor` in place. Integer tensors as Horovod's: the product in float64,
// truncated toward zero.
void scaleInPlace(const at::Tensor& t, double factor) {
  if (factor == 1.0) return;
  if (at::isFloatingType(t.scalar_type()))
    t.mul_(factor);
  else
    t.copy_(t.to(at::kDouble).mul_(factor));
}

// Runs `p` on `comm`, blocking, and returns its output.
at::Tensor runNow(Communicator& comm, Prepared p) {
  p.run(comm, false);
  scaleInPlace(p.output, p.postscale);
  return p.output;
}

std::shared_ptr<Handle> runAsync(std::shared_ptr<Communicator> comm, Prepared p) {
  auto work = p.run(*comm, true);
  return std::make_shared<Handle>(std::move(comm), std::move(work), std::move(p.output), std::move(p.keep),
                                  p.postscale);
}

std::size_t count(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}

// Elements in one row (one index of dimension 0): the product of the other dimensions, also
// when this rank has no rows.
std::int64_t rowSize(const at::Tensor& t) {
  std::int64_t n = 1;
  for (int d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

void checkRoot(int root, const Communicator& comm, const char* call) {
  if (root < 0 || root >= comm.size())
    throw py::value_error(std::string("gyre.") + call + ": root_rank " + std::to_string(root) +
                          " is outside the process set of " + std::to_string(comm.size()) + " ranks");
}

// allreduce: out of place unless `inPlace`; prescale multiplies the input first (into a copy).
Prepared prepareAllreduce(const at::Tensor& tensor, ReduceOp op, double prescale, double postscale,
                          bool inPlace, const char* call) {
  AllreduceOptions o;
  o.op = op;
  Prepared p;
  if (inPlace) {
    o.dtype = checkedInPlace(tensor, call, "tensor");
    scaleInPlace(tensor, prescale);
    p.output = tensor;
    p.keep = {tensor};
  } else {
    o.dtype = checkedDataType(tensor, call, "tensor");
    at::Tensor input = prescale != 1.0 ? tensor.clone(at::MemoryFormat::Contiguous) : contiguousInput(tensor);
    scaleInPlace(input, prescale);
    p.output = at::empty_like(input, at::MemoryFormat::Contiguous);
    p.keep = {input, p.output};
  }
  const void* in = p.keep.front().data_ptr();
  void* out = p.output.data_ptr();
  const std::size_t n = count(p.output);
  p.run = [in, out, n, o](Communicator& c, bool async) -> std::shared_ptr<Work> {
    if (async) return c.allreduceAsync(in, out, n, o);
    c.allreduce(in, out, n, o);
    return nullptr;
  };
  p.postscale = postscale;
  return p;
}

Prepared prepareBroadcast(const at::Tensor& tensor, int root, bool inPlace, Communicator& comm,
                          const char* call) {
  checkRoot(root, comm, call);
  BroadcastOptions o;
  o.root = root;
  Prepared p;
  if (inPlace) {
    o.dtype = checkedInPlace(tensor, call, "tensor");
    p.output = tensor;
  } else {
    o.dtype = checkedDataType(tensor, call, "tensor");
    p.output = tensor.clone(at::MemoryFormat::Contiguous);
  }
  p.keep = {p.output};
  void* buffer = p.output.data_ptr();
  const std::size_t n = count(p.output);
  p.run = [buffer, n, o](Communicator& c, bool async) -> std::shared_ptr<Work> {
    if (async) return c.broadcastAsync(buffer, n, o);
    c.broadcast(buffer, n, o);
    return nullptr;
  };
  return p;
}

// allgather along dim 0; the ranks' first dimensions may differ (their sizes travel first, in
// a small blocking allgather), the other dimensions must match.
Prepared prepareAllgather(const at::Tensor& tensor, Communicator& comm, const char* call) {
  CollectiveOptions o;
  o.dtype = checkedDataType(tensor, call, "tensor");
  at::Tensor input = contiguousInput(tensor.dim() == 0 ? tensor.reshape({1}) : tensor);
  const int world = comm.size();
  // Every rank's shape, padded to a fixed length so the exchange cannot go out of step.
  constexpr int kMaxDims = 16;
  if (input.dim() > kMaxDims)
    throw py::value_error(std::string("gyre.") + call + ": tensor has more than 16 dimensions");
  std::vector<std::int64_t> mine(kMaxDims + 1, -1), all(static_cast<std::size_t>(world) * (kMaxDims + 1));
  mine[0] = input.dim();
  for (int d = 0; d < input.dim(); ++d) mine[static_cast<std::size_t>(d) + 1] = input.size(d);
  CollectiveOptions shapes;
  shapes.dtype = DataType::kInt64;
  {
    py::gil_scoped_release release;
    comm.allgather(mine.data(), all.data(), mine.size(), shapes);
  }
  std::vector<std::size_t> counts(static_cast<std::size_t>(world));
  std::int64_t rows = 0;
  const std::int64_t rowElements = rowSize(input);
  for (int r = 0; r < world; ++r) {
    const std::int64_t* s = &all[static_cast<std::size_t>(r) * (kMaxDims + 1)];
    bool same = s[0] == mine[0];
    for (int d = 2; same && d <= mine[0]; ++d) same = s[d] == mine[static_cast<std::size_t>(d)];
    if (!same)
      throw py::value_error(std::string("gyre.") + call + ": rank " + std::to_string(r) +
                            "'s tensor differs from this rank's in a dimension other than the first (shape " +
                            c10::str(input.sizes()) + " here)");
    rows += s[1];
    counts[static_cast<std::size_t>(r)] = static_cast<std::size_t>(s[1] * rowElements);
  }
  std::vector<std::int64_t> outShape(input.sizes().begin(), input.sizes().end());
  outShape[0] = rows;
  Prepared p;
  p.output = at::empty(outShape, input.options());
  p.keep = {input, p.output};
  const void* in = input.data_ptr();
  void* out = p.output.data_ptr();
  p.run = [in, out, counts, o](Communicator& c, bool async) -> std::shared_ptr<Work> {
    if (async) return c.allgathervAsync(in, out, counts, o);
    c.allgatherv(in, out, counts, o);
    return nullptr;
  };
  return p;
}

// reduce_scatter along dim 0, as Horovod's reducescatter: with R rows and W ranks, rank r gets
// R / W rows, and the first R % W ranks one more.
Prepared prepareReduceScatter(const at::Tensor& tensor, ReduceOp op, Communicator& comm, const char* call) {
  const DataType dtype = checkedDataType(tensor, call, "tensor");
  if (tensor.dim() == 0)
    throw py::value_error(std::string("gyre.") + call + ": tensor must have a dimension");
  at::Tensor input = contiguousInput(tensor);
  const std::int64_t world = comm.size(), rank = comm.rank(), rows = input.size(0);
  const std::int64_t mine = rows / world + (rank < rows % world ? 1 : 0);
  const std::int64_t first = rank * (rows / world) + std::min(rank, rows % world);
  Prepared p;
  if (rows % world == 0) {
    CollectiveOptions o;
    o.dtype = dtype;
    o.op = op;
    std::vector<std::int64_t> outShape(input.sizes().begin(), input.sizes().end());
    outShape[0] = mine;
    p.output = at::empty(outShape, input.options());
    p.keep = {input, p.output};
    const void* in = input.data_ptr();
    void* out = p.output.data_ptr();
    const std::size_t n = count(p.output);
    p.run = [in, out, n, o](Communicator& c, bool async) -> std::shared_ptr<Work> {
      if (async) return c.reduceScatterAsync(in, out, n, o);
      c.reduceScatter(in, out, n, o);
      return nullptr;
    };
    return p;
  }
  // Uneven rows: the whole tensor is reduced and this rank keeps its rows (a view of the sum).
  p = prepareAllreduce(input, op, 1.0, 1.0, false, call);
  p.output = p.output.narrow(0, first, mine);
  return p;
}

// alltoall along dim 0: `splits[r]` rows go to rank r (equal shares when empty). The counts
// travel first, in a small blocking alltoall. Returns the output and the rows received from each.
std::pair<Prepared, at::Tensor> prepareAlltoall(const at::Tensor& tensor, std::vector<std::int64_t> splits,
                                                Communicator& comm, const char* call) {
  CollectiveOptions o;
  o.dtype = checkedDataType(tensor, call, "tensor");
  if (tensor.dim() == 0)
    throw py::value_error(std::string("gyre.") + call + ": tensor must have a dimension");
  at::Tensor input = contiguousInput(tensor);
  const int world = comm.size();
  const std::int64_t rows = input.size(0);
  if (splits.empty()) {
    if (rows % world != 0)
      throw py::value_error(std::string("gyre.") + call + ": tensor's first dimension (" +
                            std::to_string(rows) + ") does not divide among " + std::to_string(world) +
                            " ranks; pass splits");
    splits.assign(static_cast<std::size_t>(world), rows / world);
  }
  if (static_cast<int>(splits.size()) != world)
    throw py::value_error(std::string("gyre.") + call + ": splits has " + std::to_string(splits.size()) +
                          " entries for " + std::to_string(world) + " ranks");
  for (std::int64_t s : splits)
    if (s < 0) throw py::value_error(std::string("gyre.") + call + ": splits has a negative entry");
  if (std::accumulate(splits.begin(), splits.end(), std::int64_t{0}) != rows)
    throw py::value_error(std::string("gyre.") + call + ": splits sum to " +
                          std::to_string(std::accumulate(splits.begin(), splits.end(), std::int64_t{0})) +
                          ", not the tensor's first dimension " + std::to_string(rows));
  // Each rank sends each other its rows for it and its row size, which must agree.
  const std::int64_t rowElements = rowSize(input);
  std::vector<std::int64_t> sent, exchanged(static_cast<std::size_t>(world) * 2);
  for (std::int64_t s : splits) sent.insert(sent.end(), {s, rowElements});
  CollectiveOptions counts;
  counts.dtype = DataType::kInt64;
  {
    py::gil_scoped_release release;
    comm.alltoall(sent.data(), exchanged.data(), 2, counts);
  }
  std::vector<std::int64_t> received(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    received[static_cast<std::size_t>(r)] = exchanged[static_cast<std::size_t>(r) * 2];
    if (exchanged[static_cast<std::size_t>(r) * 2 + 1] != rowElements)
      throw py::value_error(std::string("gyre.") + call + ": rank " + std::to_string(r) + "'s rows hold " +
                            std::to_string(exchanged[static_cast<std::size_t>(r) * 2 + 1]) +
                            " elements, this rank's " + std::to_string(rowElements) + " (shape " +
                            c10::str(input.sizes()) + "): all but the first dimension must match");
  }
  std::vector<std::size_t> sendCounts, recvCounts;
  std::int64_t outRows = 0;
  for (int r = 0; r < world; ++r) {
    sendCounts.push_back(static_cast<std::size_t>(splits[static_cast<std::size_t>(r)] * rowElements));
    recvCounts.push_back(static_cast<std::size_t>(received[static_cast<std::size_t>(r)] * rowElements));
    outRows += received[static_cast<std::size_t>(r)];
  }
  std::vector<std::int64_t> outShape(input.sizes().begin(), input.sizes().end());
  outShape[0] = outRows;
  Prepared p;
  p.output = at::empty(outShape, input.options());
  p.keep = {input, p.output};
  const void* in = input.data_ptr();
  void* out = p.output.data_ptr();
  p.run = [in, out, sendCounts, recvCounts, o](Communicator& c, bool async) -> std::shared_ptr<Work> {
    if (async) return c.alltoallvAsync(in, sendCounts, out, recvCounts, o);
    c.alltoallv(in, sendCounts, out, recvCounts, o);
    return nullptr;
  };
  return {std::move(p), at::tensor(received, at::kLong)};
}

// Binds NAME (blocking) and NAME_async (a Handle) to one preparation.
template <class... Args, class Prepare, class... Extra>
void bindPair(py::module_& m, const char* name, const char* asyncName, Prepare prepare, const char* doc,
              Extra... extra) {
  m.def(
      name,
      [prepare, name](Args... args) {
        auto [comm, p] = prepare(name, args...);
        py::gil_scoped_release release;
        return runNow(*comm, std::move(p));
      },
      doc, extra...);
  m.def(
      asyncName,
      [prepare, asyncName](Args... args) {
        auto [comm, p] = prepare(asyncName, args...);
        py::gil_scoped_release release;
        return runAsync(std::move(comm), std::move(p));
      },
      doc, extra...);
}

}  // namespace

Handle::Handle(std::shared_ptr<Communicator> comm, std::shared_ptr<Work> work, at::Tensor output,
               std::vector<at::Tensor> keep, double postscale)
    : comm_(std::move(comm)),
      work_(std::move(work)),
      output_(std::move(output)),
      keep_(std::move(keep)),
      postscale_(postscale) {}

Handle::~Handle() {
  if (done_ || !work_) return;
  try {
    work_->wait();
  } catch (...) {  // nobody asked for the result; the failure reaches the next call on comm_
  }
}

bool Handle::poll() const {
  return done_ || work_->isCompleted();
}

at::Tensor Handle::wait() {
  if (!done_) {
    work_->wait();  // rethrows the collective's failure
    scaleInPlace(output_, postscale_);
    keep_.clear();
    done_ = true;
  }
  return output_;
}

void bindCollectives(py::module_& m) {
  py::class_<Handle, std::shared_ptr<Handle>>(
      m, "Handle", "An asynchronous collective in flight; wait() returns its output.")
      .def("wait", &Handle::wait, py::call_guard<py::gil_scoped_release>(),
           "Blocks until the collective finishes and returns its output; raises its failure.")
      .def("poll", &Handle::poll, "True once the collective has finished (never blocks).");

  auto allreduce = [](bool inPlace) {
    return [inPlace](const char* call, const at::Tensor& tensor, ReduceOp op, double prescale,
                     double postscale, int processSet) {
      auto comm = World::communicator(processSet, call);
      return std::make_pair(comm, prepareAllreduce(tensor, op, prescale, postscale, inPlace, call));
    };
  };
  for (const bool inPlace : {false, true}) {
    bindPair<const at::Tensor&, ReduceOp, double, double, int>(
        m, inPlace ? "allreduce_" : "allreduce", inPlace ? "allreduce_async_" : "allreduce_async",
        allreduce(inPlace),
        inPlace ? "Reduces `tensor` over the ranks in place (op: Average by default)."
                : "Reduces `tensor` over the ranks into a new tensor (op: Average by default).",
        py::arg("tensor"), py::arg("op") = ReduceOp::kAverage, py::arg("prescale_factor") = 1.0,
        py::arg("postscale_factor") = 1.0, py::arg("process_set") = 0);
  }

  auto broadcast = [](bool inPlace) {
    return [inPlace](const char* call, const at::Tensor& tensor, int root, int processSet) {
      auto comm = World::communicator(processSet, call);
      return std::make_pair(comm, prepareBroadcast(tensor, root, inPlace, *comm, call));
    };
  };
  bindPair<const at::Tensor&, int, int>(m, "broadcast", "broadcast_async", broadcast(false),
                                        "A copy of root_rank's `tensor` on every rank.", py::arg("tensor"),
                                        py::arg("root_rank"), py::arg("process_set") = 0);
  bindPair<const at::Tensor&, int, int>(m, "broadcast_", "broadcast_async_", broadcast(true),
                                        "Overwrites `tensor` with root_rank's, in place.", py::arg("tensor"),
                                        py::arg("root_rank"), py::arg("process_set") = 0);

  bindPair<const at::Tensor&, int>(
      m, "allgather", "allgather_async",
      [](const char* call, const at::Tensor& tensor, int processSet) {
        auto comm = World::communicator(processSet, call);
        return std::make_pair(comm, prepareAllgather(tensor, *comm, call));
      },
      "Every rank's `tensor` concatenated along the first dimension, in rank order (first dimensions may "
      "differ).",
      py::arg("tensor"), py::arg("process_set") = 0);

  bindPair<const at::Tensor&, ReduceOp, int>(
      m, "reduce_scatter", "reduce_scatter_async",
      [](const char* call, const at::Tensor& tensor, ReduceOp op, int processSet) {
        auto comm = World::communicator(processSet, call);
        return std::make_pair(comm, prepareReduceScatter(tensor, op, *comm, call));
      },
      "Reduces `tensor` over the ranks and gives rank r its share of the rows (op: Average by default).",
      py::arg("tensor"), py::arg("op") = ReduceOp::kAverage, py::arg("process_set") = 0);

  m.def(
      "alltoall",
      [](const at::Tensor& tensor, std::vector<std::int64_t> splits, int processSet) {
        auto comm = World::communicator(processSet, "alltoall");
        auto [p, received] = prepareAlltoall(tensor, std::move(splits), *comm, "alltoall");
        at::Tensor out;
        {
          py::gil_scoped_release release;
          out = runNow(*comm, std::move(p));
        }
        return std::make_pair(out, received);
      },
      "Sends splits[r] rows of `tensor` to rank r; returns what arrived and the rows from each rank.",
      py::arg("tensor"), py::arg("splits") = std::vector<std::int64_t>{}, py::arg("process_set") = 0);
  m.def(
      "alltoall_async",
      [](const at::Tensor& tensor, std::vector<std::int64_t> splits, int processSet) {
        auto comm = World::communicator(processSet, "alltoall_async");
        auto [p, received] = prepareAlltoall(tensor, std::move(splits), *comm, "alltoall_async");
        py::gil_scoped_release release;
        return std::make_pair(runAsync(comm, std::move(p)), received);
      },
      py::arg("tensor"), py::arg("splits") = std::vector<std::int64_t>{}, py::arg("process_set") = 0);

  m.def(
      "barrier",
      [](int processSet) {
        auto comm = World::communicator(processSet, "barrier");
        py::gil_scoped_release release;
        comm->barrier();
      },
      "Returns once every rank of the process set has called it.", py::arg("process_set") = 0);
}

}  // namespace gyre::python
