#include "python/prepared.h"

#include <numeric>
#include <string>

#include "gyre/torch/broadcast.h"
#include "python/tensors.h"

namespace py = pybind11;

namespace gyre::python {
namespace {

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

std::string where(const char* call) {
  return std::string("gyre.") + call + ": ";
}

}  // namespace

void scaleInPlace(const at::Tensor& t, double factor) {
  if (factor == 1.0) return;
  if (at::isFloatingType(t.scalar_type()))
    t.mul_(factor);
  else
    t.copy_(t.to(at::kDouble).mul_(factor));
}

at::Tensor runNow(Communicator& comm, Prepared p) {
  p.run(comm, false);
  scaleInPlace(p.output, p.postscale);
  return p.output;
}

void checkRoot(int root, const Communicator& comm, const char* call) {
  if (root < 0 || root >= comm.size())
    throw py::value_error(where(call) + "root_rank " + std::to_string(root) + " is outside the process set of " +
                          std::to_string(comm.size()) + " ranks");
}

void checkHasRows(const at::Tensor& tensor, const char* call) {
  if (tensor.dim() == 0) throw py::value_error(where(call) + "tensor must have a dimension");
}

std::vector<std::int64_t> checkedSplits(const at::Tensor& tensor, std::vector<std::int64_t> splits, int world,
                                        const char* call) {
  checkHasRows(tensor, call);
  const std::int64_t rows = tensor.size(0);
  if (splits.empty()) {
    if (rows % world != 0)
      throw py::value_error(where(call) + "tensor's first dimension (" + std::to_string(rows) +
                            ") does not divide among " + std::to_string(world) + " ranks; pass splits");
    splits.assign(static_cast<std::size_t>(world), rows / world);
  }
  if (static_cast<int>(splits.size()) != world)
    throw py::value_error(where(call) + "splits has " + std::to_string(splits.size()) + " entries for " +
                          std::to_string(world) + " ranks");
  for (std::int64_t s : splits)
    if (s < 0) throw py::value_error(where(call) + "splits has a negative entry");
  const std::int64_t sum = std::accumulate(splits.begin(), splits.end(), std::int64_t{0});
  if (sum != rows)
    throw py::value_error(where(call) + "splits sum to " + std::to_string(sum) + ", not the tensor's first dimension " +
                          std::to_string(rows));
  return splits;
}

Prepared prepareAllreduce(const at::Tensor& tensor, ReduceOp op, double prescale, double postscale, bool inPlace) {
  AllreduceOptions o;
  o.op = op;
  o.dtype = gyre::torch::toDataType(tensor.scalar_type());
  Prepared p;
  if (inPlace) {
    scaleInPlace(tensor, prescale);
    p.output = tensor;
    p.keep = {tensor};
  } else {
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

Prepared prepareBroadcast(const at::Tensor& tensor, int root, bool inPlace) {
  BroadcastOptions o;
  o.root = root;
  o.dtype = gyre::torch::toDataType(tensor.scalar_type());
  Prepared p;
  p.output = inPlace ? tensor : tensor.clone(at::MemoryFormat::Contiguous);
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

Prepared prepareAllgather(const at::Tensor& tensor, const std::vector<std::int64_t>& rows, std::int64_t rowElements) {
  CollectiveOptions o;
  o.dtype = gyre::torch::toDataType(tensor.scalar_type());
  at::Tensor input = contiguousInput(tensor.dim() == 0 ? tensor.reshape({1}) : tensor);
  std::vector<std::size_t> counts;
  std::int64_t total = 0;
  for (std::int64_t r : rows) {
    counts.push_back(static_cast<std::size_t>(r * rowElements));
    total += r;
  }
  std::vector<std::int64_t> outShape(input.sizes().begin(), input.sizes().end());
  outShape[0] = total;
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

Prepared prepareReduceScatter(const at::Tensor& tensor, ReduceOp op, const Communicator& comm) {
  at::Tensor input = contiguousInput(tensor);
  const std::int64_t world = comm.size(), rank = comm.rank(), rows = input.size(0);
  const std::int64_t mine = rows / world + (rank < rows % world ? 1 : 0);
  const std::int64_t first = rank * (rows / world) + std::min(rank, rows % world);
  if (rows % world != 0) {
    // Uneven rows: the whole tensor is reduced and this rank keeps its rows (a view of the sum).
    Prepared p = prepareAllreduce(input, op, 1.0, 1.0, false);
    p.output = p.output.narrow(0, first, mine);
    return p;
  }
  CollectiveOptions o;
  o.dtype = gyre::torch::toDataType(input.scalar_type());
  o.op = op;
  std::vector<std::int64_t> outShape(input.sizes().begin(), input.sizes().end());
  outShape[0] = mine;
  Prepared p;
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

std::pair<Prepared, at::Tensor> prepareAlltoall(const at::Tensor& tensor, const std::vector<std::int64_t>& splits,
                                                Communicator& comm, const char* call) {
  CollectiveOptions o;
  o.dtype = gyre::torch::toDataType(tensor.scalar_type());
  at::Tensor input = contiguousInput(tensor);
  const int world = comm.size();
  // Each rank sends each other its rows for it and its row size, which must agree.
  const std::int64_t rowElements = rowSize(input);
  std::vector<std::int64_t> sent, exchanged(static_cast<std::size_t>(world) * 2);
  for (std::int64_t s : splits) sent.insert(sent.end(), {s, rowElements});
  CollectiveOptions counts;
  counts.dtype = DataType::kInt64;
  comm.alltoall(sent.data(), exchanged.data(), 2, counts);
  std::vector<std::int64_t> received(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) {
    received[static_cast<std::size_t>(r)] = exchanged[static_cast<std::size_t>(r) * 2];
    if (exchanged[static_cast<std::size_t>(r) * 2 + 1] != rowElements)
      throw py::value_error(where(call) + "rank " + std::to_string(r) + "'s rows hold " +
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

}  // namespace gyre::python
