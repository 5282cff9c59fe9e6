#include "python/c10d_ops.h"

#include <torch/csrc/utils/tensor_dtypes.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"

namespace gyre::python::ops {
namespace {

// Non-positive: the communicator's own time-out (torch's kUnsetTimeout is -1).
Timeout timeoutOf(std::chrono::milliseconds t) {
  return t.count() > 0 ? t : Timeout{0};
}

DataType reducible(const at::Tensor& t, const char* call) {
  try {
    return gyre::torch::toDataType(t.scalar_type());
  } catch (const InvalidArgument&) {
  }
  TORCH_CHECK(false, "gyre backend: ", call, ": cannot reduce a tensor of dtype torch.",
              ::torch::utils::getDtypeNames(t.scalar_type()).first,
              "; gyre reduces float16, bfloat16, float32, float64, int8, uint8, int16, int32 and int64");
}

ReduceOp reduceOp(const c10d::ReduceOp& op, const char* call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ReduceOp::kAverage;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProduct;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    default: break;
  }
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM", "UNUSED"};
  TORCH_CHECK(false, "gyre backend: ", call, ": ReduceOp.", names[std::min<int>(op.op_, 9)],
              " is not supported (SUM, AVG, PRODUCT, MIN and MAX are)");
}

void checkRoot(int64_t root, int size, const char* call) {
  TORCH_CHECK(root >= 0 && root < size, "gyre backend: ", call, ": root rank ", root, " is not in a group of ", size,
              " ranks");
}

// Every tensor of `list` has `like`'s dtype and number of elements.
void checkLike(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* call, const char* what) {
  for (const auto& t : list) {
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "gyre backend: ", call, ": ", what, " has dtype ",
                t.scalar_type(), ", the input ", like.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "gyre backend: ", call, ": ", what, " has ", t.numel(),
                " elements, the input ", like.numel());
  }
}

void checkListSize(std::size_t n, int size, const char* call, const char* what) {
  TORCH_CHECK(n == static_cast<std::size_t>(size), "gyre backend: ", call, ": ", what, " holds ", n,
              " tensors; the group has ", size, " ranks");
}

std::vector<Staged> stageAll(const std::vector<at::Tensor>& list, const char* call, bool copyIn) {
  std::vector<Staged> staged;
  staged.reserve(list.size());
  for (const auto& t : list) staged.push_back(stage(t, call, copyIn));
  return staged;
}

// The bytes of `parts`, back to back.
at::Tensor packed(const std::vector<Staged>& parts) {
  std::size_t total = 0;
  for (const auto& p : parts) total += p.bytes();
  at::Tensor flat = at::empty({static_cast<int64_t>(total)}, at::kByte);
  auto* out = static_cast<std::uint8_t*>(flat.data_ptr());
  for (const auto& p : parts) {
    std::memcpy(out, p.data(), p.bytes());
    out += p.bytes();
  }
  return flat;
}

// The reverse: `parts` filled from the bytes at `from`, then written back.
void unpack(const std::uint8_t* from, std::vector<Staged>& parts) {
  for (auto& p : parts) {
    std::memcpy(p.data(), from, p.bytes());
    from += p.bytes();
    p.finish();
  }
}

CollectiveOptions bytesOptions(std::chrono::milliseconds timeout) {
  CollectiveOptions o;
  o.dtype = DataType::kUInt8;
  o.timeout = timeoutOf(timeout);
  return o;
}

}  // namespace

void Staged::begin() {
  if (user_.is_contiguous())
    work_ = user_;
  else
    work_ = copyIn_ ? user_.contiguous() : at::empty(user_.sizes(), user_.options());
}

void Staged::finish() {
  if (copyOut_ && !work_.is_same(user_)) user_.copy_(work_);
}

void beginAll(std::vector<Staged>& staged) {
  for (auto& s : staged) s.begin();
}

Staged stage(const at::Tensor& t, const char* call, bool copyIn, bool copyOut) {
  TORCH_CHECK(t.defined(), "gyre backend: ", call, ": an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "gyre backend: ", call, ": the tensor lives on ", t.device().str(),
              "; the gyre backend takes CPU tensors");
  TORCH_CHECK(t.layout() == at::kStrided, "gyre backend: ", call,
              ": a sparse tensor; the gyre backend takes dense ones (tensor.to_dense())");
  return Staged(t, copyIn, copyOut);
}

at::Tensor singleTensor(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "gyre backend: ", call, " takes one tensor per process (", tensors.size(),
              " given)");
  return tensors[0];
}

void checkPeer(int peer, int rank, int size, const char* call) {
  TORCH_CHECK(peer >= 0 && peer < size, "gyre backend: ", call, ": rank ", peer, " is not in a group of ", size,
              " ranks");
  TORCH_CHECK(peer != rank, "gyre backend: ", call, ": rank ", rank, " cannot ", call, " to itself");
}

Op broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts, int size) {
  at::Tensor t = singleTensor(tensors, "broadcast");
  checkRoot(opts.rootRank, size, "broadcast");
  Staged s = stage(t, "broadcast", true);
  BroadcastOptions o;
  o.dtype = DataType::kUInt8;
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = timeoutOf(opts.timeout);
  return {{t}, [s, o](Communicator& c) mutable {
            s.begin();
            c.broadcast(s.data(), s.bytes(), o);
            s.finish();
          }};
}

Op allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor t = singleTensor(tensors, "all_reduce");
  Staged s = stage(t, "all_reduce", true);
  AllreduceOptions o;
  o.dtype = reducible(t, "all_reduce");
  o.op = reduceOp(opts.reduceOp, "all_reduce");
  o.timeout = timeoutOf(opts.timeout);
  return {{t}, [s, o](Communicator& c) mutable {
            s.begin();
            c.allreduce(s.data(), s.data(), s.count(), o);
            s.finish();
          }};
}

Op allreduceCoalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "gyre backend: all_reduce_coalesced: no tensors");
  AllreduceOptions o;
  o.dtype = reducible(tensors[0], "all_reduce_coalesced");
  for (const auto& t : tensors)
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "gyre backend: all_reduce_coalesced: the tensors have different dtypes (", tensors[0].scalar_type(),
                ", ", t.scalar_type(), ")");
  o.op = reduceOp(opts.reduceOp, "all_reduce_coalesced");
  o.timeout = timeoutOf(opts.timeout);
  std::vector<Staged> parts = stageAll(tensors, "all_reduce_coalesced", true);
  return {tensors, [parts, o](Communicator& c) mutable {
            beginAll(parts);
            at::Tensor flat = packed(parts);
            const std::size_t count = flat.nbytes() / dtypeSize(o.dtype);
            c.allreduce(flat.data_ptr(), flat.data_ptr(), count, o);
            unpack(static_cast<const std::uint8_t*>(flat.data_ptr()), parts);
          }};
}

Op reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts, int rank, int size) {
  at::Tensor t = singleTensor(tensors, "reduce");
  checkRoot(opts.rootRank, size, "reduce");
  Staged s = stage(t, "reduce", true);
  ReduceOptions o;
  o.dtype = reducible(t, "reduce");
  o.op = reduceOp(opts.reduceOp, "reduce");
  o.root = static_cast<int>(opts.rootRank);
  o.timeout = timeoutOf(opts.timeout);
  const bool root = rank == o.root;
  return {{t}, [s, o, root](Communicator& c) mutable {
            s.begin();
            if (!root) return c.reduce(s.data(), nullptr, s.count(), o);
            at::Tensor input = s.tensor().clone();
            c.reduce(input.data_ptr(), s.data(), s.count(), o);
            s.finish();
          }};
}

Op allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
             const c10d::AllgatherOptions& opts, int size) {
  at::Tensor in = singleTensor(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "gyre backend: all_gather takes one output list per process");
  checkListSize(outputs[0].size(), size, "all_gather", "the output list");
  checkLike(outputs[0], in, "all_gather", "an output tensor");
  Staged input = stage(in, "all_gather", true);
  std::vector<Staged> outs = stageAll(outputs[0], "all_gather", false);
  const CollectiveOptions o = bytesOptions(opts.timeout);
  return {outputs[0], [input, outs, o, size](Communicator& c) mutable {
            input.begin();
            beginAll(outs);
            at::Tensor flat = at::empty({static_cast<int64_t>(input.bytes()) * size}, at::kByte);
            c.allgather(input.data(), flat.data_ptr(), input.bytes(), o);
            unpack(static_cast<const std::uint8_t*>(flat.data_ptr()), outs);
          }};
}

Op allgatherBase(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts, int size) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre backend: all_gather_into_tensor: the output has dtype ",
              output.scalar_type(), ", the input ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size, "gyre backend: all_gather_into_tensor: the output has ",
              output.numel(), " elements; it needs the group's size (", size, ") times the input's ", input.numel());
  Staged in = stage(input, "all_gather_into_tensor", true);
  Staged out = stage(output, "all_gather_into_tensor", false);
  const CollectiveOptions o = bytesOptions(opts.timeout);
  return {{output}, [in, out, o](Communicator& c) mutable {
            in.begin();
            out.begin();
            c.allgather(in.data(), out.data(), in.bytes(), o);
            out.finish();
          }};
}

Op allgatherCoalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                      const c10d::AllgatherOptions& opts, int size) {
  checkListSize(outputs.size(), size, "all_gather_coalesced", "the output list");
  std::vector<Staged> ins = stageAll(inputs, "all_gather_coalesced", true);
  std::vector<Staged> outs;
  std::vector<at::Tensor> flatOutputs;
  for (auto& perRank : outputs) {
    TORCH_CHECK(perRank.size() == inputs.size(), "gyre backend: all_gather_coalesced: an output list holds ",
                perRank.size(), " tensors for ", inputs.size(), " inputs");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      checkLike({perRank[i]}, inputs[i], "all_gather_coalesced", "an output tensor");
      outs.push_back(stage(perRank[i], "all_gather_coalesced", false));
      flatOutputs.push_back(perRank[i]);
    }
  }
  const CollectiveOptions o = bytesOptions(opts.timeout);
  return {flatOutputs, [ins, outs, o, size](Communicator& c) mutable {
            beginAll(ins);
            beginAll(outs);
            at::Tensor mine = packed(ins);
            at::Tensor flat = at::empty({static_cast<int64_t>(mine.nbytes()) * size}, at::kByte);
            c.allgather(mine.data_ptr(), flat.data_ptr(), mine.nbytes(), o);
            unpack(static_cast<const std::uint8_t*>(flat.data_ptr()), outs);
          }};
}

Op gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
          const c10d::GatherOptions& opts, int rank, int size) {
  at::Tensor in = singleTensor(inputs, "gather");
  checkRoot(opts.rootRank, size, "gather");
  CollectiveOptions o = bytesOptions(opts.timeout);
  o.root = static_cast<int>(opts.rootRank);
  const bool root = rank == o.root;
  std::vector<Staged> outs;
  std::vector<at::Tensor> results;
  if (root) {
    TORCH_CHECK(outputs.size() == 1, "gyre backend: gather: the root takes one output list");
    checkListSize(outputs[0].size(), size, "gather", "the root's output list");
    checkLike(outputs[0], in, "gather", "an output tensor");
    outs = stageAll(outputs[0], "gather", false);
    results = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "gyre backend: gather: only the root (rank ", o.root,
                ") takes an output list");
  }
  Staged input = stage(in, "gather", true);
  return {results, [input, outs, o, root, size](Communicator& c) mutable {
            input.begin();
            beginAll(outs);
            if (!root) return c.gather(input.data(), nullptr, input.bytes(), o);
            at::Tensor flat = at::empty({static_cast<int64_t>(input.bytes()) * size}, at::kByte);
            c.gather(input.data(), flat.data_ptr(), input.bytes(), o);
            unpack(static_cast<const std::uint8_t*>(flat.data_ptr()), outs);
          }};
}

Op scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
           const c10d::ScatterOptions& opts, int rank, int size) {
  at::Tensor out = singleTensor(outputs, "scatter");
  checkRoot(opts.rootRank, size, "scatter");
  CollectiveOptions o = bytesOptions(opts.timeout);
  o.root = static_cast<int>(opts.rootRank);
  const bool root = rank == o.root;
  std::vector<Staged> ins;
  if (root) {
    TORCH_CHECK(inputs.size() == 1, "gyre backend: scatter: the root takes one input list");
    checkListSize(inputs[0].size(), size, "scatter", "the root's input list");
    checkLike(inputs[0], out, "scatter", "an input tensor");
    ins = stageAll(inputs[0], "scatter", true);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "gyre backend: scatter: only the root (rank ", o.root,
                ") takes an input list");
  }
  Staged output = stage(out, "scatter", false);
  return {{out}, [ins, output, o, root](Communicator& c) mutable {
            beginAll(ins);
            output.begin();
            at::Tensor flat = root ? packed(ins) : at::Tensor();
            c.scatter(root ? flat.data_ptr() : nullptr, output.data(), output.bytes(), o);
            output.finish();
          }};
}

Op reduceScatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                 const c10d::ReduceScatterOptions& opts, int size) {
  at::Tensor out = singleTensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "gyre backend: reduce_scatter takes one input list per process");
  checkListSize(inputs[0].size(), size, "reduce_scatter", "the input list");
  checkLike(inputs[0], out, "reduce_scatter", "an input tensor");
  CollectiveOptions o;
  o.dtype = reducible(out, "reduce_scatter");
  o.op = reduceOp(opts.reduceOp, "reduce_scatter");
  o.timeout = timeoutOf(opts.timeout);
  std::vector<Staged> ins = stageAll(inputs[0], "reduce_scatter", true);
  Staged output = stage(out, "reduce_scatter", false);
  return {{out}, [ins, output, o](Communicator& c) mutable {
            beginAll(ins);
            output.begin();
            at::Tensor flat = packed(ins);
            c.reduceScatter(flat.data_ptr(), output.data(), output.count(), o);
            output.finish();
          }};
}

Op reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts, int size) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre backend: reduce_scatter_tensor: the output has dtype ",
              output.scalar_type(), ", the input ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size, "gyre backend: reduce_scatter_tensor: the input has ",
              input.numel(), " elements; it needs the group's size (", size, ") times the output's ", output.numel());
  CollectiveOptions o;
  o.dtype = reducible(output, "reduce_scatter_tensor");
  o.op = reduceOp(opts.reduceOp, "reduce_scatter_tensor");
  o.timeout = timeoutOf(opts.timeout);
  Staged in = stage(input, "reduce_scatter_tensor", true);
  Staged out = stage(output, "reduce_scatter_tensor", false);
  return {{output}, [in, out, o](Communicator& c) mutable {
            in.begin();
            out.begin();
            c.reduceScatter(in.data(), out.data(), out.count(), o);
            out.finish();
          }};
}

namespace {

// Byte counts per rank of an all_to_all_single side: `splits` rows each (empty: equal parts).
std::vector<std::size_t> splitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                    const char* side) {
  TORCH_CHECK(t.dim() >= 1, "gyre backend: all_to_all_single: the ", side, " needs at least one dimension");
  const int64_t rows = t.size(0);
  const std::size_t rowBytes = rows == 0 ? 0 : t.nbytes() / static_cast<std::size_t>(rows);
  std::vector<std::size_t> bytes;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "gyre backend: all_to_all_single: the ", side, "'s ", rows,
                " rows do not split evenly over ", size, " ranks; give the split sizes");
    bytes.assign(size, rowBytes * static_cast<std::size_t>(rows / size));
    return bytes;
  }
  checkListSize(splits.size(), size, "all_to_all_single", side == std::string("input") ? "input_split_sizes"
                                                                                        : "output_split_sizes");
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "gyre backend: all_to_all_single: the ",
              side, "'s split sizes do not add up to its ", rows, " rows");
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "gyre backend: all_to_all_single: a negative split size");
    bytes.push_back(rowBytes * static_cast<std::size_t>(s));
  }
  return bytes;
}

}  // namespace

Op alltoallBase(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                const std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts, int size) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre backend: all_to_all_single: the output has dtype ",
              output.scalar_type(), ", the input ", input.scalar_type());
  std::vector<std::size_t> sendBytes = splitBytes(input, inputSplits, size, "input");
  std::vector<std::size_t> recvBytes = splitBytes(output, outputSplits, size, "output");
  Staged in = stage(input, "all_to_all_single", true);
  Staged out = stage(output, "all_to_all_single", false);
  const CollectiveOptions o = bytesOptions(opts.timeout);
  return {{output}, [in, out, sendBytes, recvBytes, o](Communicator& c) mutable {
            in.begin();
            out.begin();
            c.alltoallv(in.data(), sendBytes, out.data(), recvBytes, o);
            out.finish();
          }};
}

Op alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions& opts,
            int size) {
  checkListSize(inputs.size(), size, "all_to_all", "the input list");
  checkListSize(outputs.size(), size, "all_to_all", "the output list");
  std::vector<Staged> ins = stageAll(inputs, "all_to_all", true);
  std::vector<Staged> outs = stageAll(outputs, "all_to_all", false);
  std::vector<std::size_t> sendBytes, recvBytes;
  for (int r = 0; r < size; ++r) {
    TORCH_CHECK(outputs[r].scalar_type() == inputs[r].scalar_type(), "gyre backend: all_to_all: output ", r,
                " has dtype ", outputs[r].scalar_type(), ", input ", r, " ", inputs[r].scalar_type());
    sendBytes.push_back(ins[r].bytes());
    recvBytes.push_back(outs[r].bytes());
  }
  const CollectiveOptions o = bytesOptions(opts.timeout);
  return {outputs, [ins, outs, sendBytes, recvBytes, o](Communicator& c) mutable {
            beginAll(ins);
            beginAll(outs);
            at::Tensor send = packed(ins);
            at::Tensor recv = at::empty({static_cast<int64_t>(std::accumulate(recvBytes.begin(), recvBytes.end(),
                                                                              std::size_t{0}))},
                                        at::kByte);
            c.alltoallv(send.data_ptr(), sendBytes, recv.data_ptr(), recvBytes, o);
            unpack(static_cast<const std::uint8_t*>(recv.data_ptr()), outs);
          }};
}

Op barrier(const c10d::BarrierOptions& opts) {
  BarrierOptions o;
  o.timeout = timeoutOf(opts.timeout);
  return {{}, [o](Communicator& c) { c.barrier(o); }};
}

}  // namespace gyre::python::ops
