#include "gyre/torch/tensor_parallel.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "gyre/torch/broadcast.h"

namespace gyre::torch {
namespace {

using ::torch::Tensor;
using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

int groupSize(const std::shared_ptr<Communicator>& comm) {
  return comm ? comm->size() : 1;
}
int groupRank(const std::shared_ptr<Communicator>& comm) {
  return comm ? comm->rank() : 0;
}

// The communicator travels through autograd's saved data as an integer (IValues hold no
// pointers); the module that owns the shared_ptr outlives the graph.
std::int64_t handle(const std::shared_ptr<Communicator>& comm) {
  return reinterpret_cast<std::int64_t>(comm.get());
}
Communicator* fromHandle(AutogradContext* ctx) {
  return reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

// The sum of t over the group's ranks, as a new contiguous tensor.
Tensor sumOverGroup(Communicator* comm, const Tensor& t) {
  Tensor out = t.contiguous().clone();
  if (comm == nullptr || comm->size() == 1) return out;
  comm->allreduce(out.data_ptr(), out.data_ptr(), static_cast<std::size_t>(out.numel()),
                  {toDataType(out.scalar_type())});
  return out;
}

// Every rank's t concatenated along the last dimension (ranks in order).
Tensor gatherLastDim(Communicator* comm, const Tensor& t) {
  if (comm == nullptr || comm->size() == 1) return t.contiguous().clone();
  const Tensor mine = t.contiguous();
  Tensor all = ::torch::empty({comm->size(), mine.numel()}, mine.options());  // rank-major
  comm->allgather(mine.data_ptr(), all.data_ptr(), static_cast<std::size_t>(mine.numel()),
                  {toDataType(mine.scalar_type())});
  std::vector<Tensor> parts;
  for (const Tensor& part : all.unbind(0)) parts.push_back(part.view(mine.sizes()));
  return ::torch::cat(parts, -1);
}

// This rank's slice of t's last dimension.
Tensor sliceLastDim(Communicator* comm, const Tensor& t) {
  const int size = comm != nullptr ? comm->size() : 1;
  const std::int64_t width = t.size(-1);
  GYRE_ARG_CHECK(width % size == 0, "tensor parallel: the last dimension (", width,
                 ") does not divide by the group's ", size, " ranks");
  const std::int64_t share = width / size;
  const int rank = comm != nullptr ? comm->rank() : 0;
  return t.narrow(-1, rank * share, share).contiguous();
}

struct CopyToGroup : public ::torch::autograd::Function<CopyToGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {sumOverGroup(fromHandle(ctx), grads[0]), Tensor()};
  }
};

struct ReduceFromGroup : public ::torch::autograd::Function<ReduceFromGroup> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& x, std::int64_t comm) {
    return sumOverGroup(reinterpret_cast<Communicator*>(comm), x);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) {
    return {grads[0], Tensor()};
  }
};

struct GatherFromGroup : public ::torch::autograd::Function<GatherFromGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return gatherLastDim(reinterpret_cast<Communicator*>(comm), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {sliceLastDim(fromHandle(ctx), grads[0]), Tensor()};
  }
};

struct ScatterToGroup : public ::torch::autograd::Function<ScatterToGroup> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return sliceLastDim(reinterpret_cast<Communicator*>(comm), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gatherLastDim(fromHandle(ctx), grads[0]), Tensor()};
  }
};

// The share of `total` one rank holds; InvalidArgument naming `what` when it does not divide.
std::int64_t share(std::int64_t total, const std::shared_ptr<Communicator>& comm, const char* what) {
  GYRE_ARG_CHECK(total >= 1, "tensor parallel: ", what, " must be at least 1 (got ", total, ")");
  const int size = groupSize(comm);
  GYRE_ARG_CHECK(total % size == 0, "tensor parallel: ", what, " (", total, ") does not divide by the ", size,
                 " ranks of the tensor-parallel group");
  return total / size;
}

// An unsharded Linear's weight and bias as libtorch initialises them (the draws a plain
// torch::nn::Linear(in, out) makes, in its order).
std::pair<Tensor, Tensor> fullLinear(std::int64_t in, std::int64_t out, bool bias) {
  ::torch::nn::Linear full(::torch::nn::LinearOptions(in, out).bias(bias));
  return {full->weight.detach(), bias ? full->bias.detach() : Tensor()};
}

void checkShape(const Tensor& t, std::vector<std::int64_t> shape, const char* what) {
  GYRE_ARG_CHECK(t.defined() && t.sizes().vec() == shape, "tensor parallel: ", what, " has shape ",
                 t.defined() ? c10::str(t.sizes()) : std::string("(none)"), ", not ", c10::str(shape));
}

}  // namespace

Tensor copyToTensorParallel(const Tensor& x, const std::shared_ptr<Communicator>& comm) {
  return CopyToGroup::apply(x, handle(comm));
}
Tensor reduceFromTensorParallel(const Tensor& x, const std::shared_ptr<Communicator>& comm) {
  return ReduceFromGroup::apply(x, handle(comm));
}
Tensor gatherFromTensorParallel(const Tensor& x, const std::shared_ptr<Communicator>& comm) {
  return GatherFromGroup::apply(x, handle(comm));
}
Tensor scatterToTensorParallel(const Tensor& x, const std::shared_ptr<Communicator>& comm) {
  return ScatterToGroup::apply(x, handle(comm));
}

// ---- ColumnParallelLinear

ColumnParallelLinearImpl::ColumnParallelLinearImpl(ColumnParallelLinearOptions options_,
                                                   std::shared_ptr<Communicator> comm)
    : options(options_), comm_(std::move(comm)) {
  reset();
}

void ColumnParallelLinearImpl::reset() {
  const std::int64_t rows = share(options.out(), comm_, "ColumnParallelLinear's out");
  GYRE_ARG_CHECK(options.in() >= 1, "tensor parallel: ColumnParallelLinear's in must be at least 1");
  weight = register_parameter("weight", ::torch::empty({rows, options.in()}));
  bias = register_parameter("bias", ::torch::empty({rows}), options.bias());
  auto [w, b] = fullLinear(options.in(), options.out(), options.bias());
  loadShard(w, b);
}

void ColumnParallelLinearImpl::loadShard(const Tensor& fullWeight, const Tensor& fullBias) {
  checkShape(fullWeight, {options.out(), options.in()}, "ColumnParallelLinear's full weight");
  const std::int64_t rows = weight.size(0);
  ::torch::NoGradGuard noGrad;
  weight.copy_(fullWeight.narrow(0, groupRank(comm_) * rows, rows));
  if (options.bias()) {
    checkShape(fullBias, {options.out()}, "ColumnParallelLinear's full bias");
    bias.copy_(fullBias.narrow(0, groupRank(comm_) * rows, rows));
  }
}

Tensor ColumnParallelLinearImpl::forward(const Tensor& input) {
  const Tensor out = ::torch::nn::functional::linear(copyToTensorParallel(input, comm_), weight,
                                                     options.bias() ? bias : Tensor());
  return options.gather_output() ? gatherFromTensorParallel(out, comm_) : out;
}

// ---- RowParallelLinear

RowParallelLinearImpl::RowParallelLinearImpl(RowParallelLinearOptions options_,
                                             std::shared_ptr<Communicator> comm)
    : options(options_), comm_(std::move(comm)) {
  reset();
}

void RowParallelLinearImpl::reset() {
  const std::int64_t columns = share(options.in(), comm_, "RowParallelLinear's in");
  GYRE_ARG_CHECK(options.out() >= 1, "tensor parallel: RowParallelLinear's out must be at least 1");
  weight = register_parameter("weight", ::torch::empty({options.out(), columns}));
  bias = register_parameter("bias", ::torch::empty({options.out()}), options.bias());
  auto [w, b] = fullLinear(options.in(), options.out(), options.bias());
  loadShard(w, b);
}

void RowParallelLinearImpl::loadShard(const Tensor& fullWeight, const Tensor& fullBias) {
  checkShape(fullWeight, {options.out(), options.in()}, "RowParallelLinear's full weight");
  const std::int64_t columns = weight.size(1);
  ::torch::NoGradGuard noGrad;
  weight.copy_(fullWeight.narrow(1, groupRank(comm_) * columns, columns));
  if (options.bias()) {
    checkShape(fullBias, {options.out()}, "RowParallelLinear's full bias");
    bias.copy_(fullBias);
  }
}

Tensor RowParallelLinearImpl::forward(const Tensor& input) {
  const Tensor mine = options.input_is_parallel() ? input : scatterToTensorParallel(input, comm_);
  GYRE_ARG_CHECK(mine.size(-1) == weight.size(1), "RowParallelLinear: the input has ", mine.size(-1),
                 " features on this rank, not ", weight.size(1));
  const Tensor out = reduceFromTensorParallel(::torch::nn::functional::linear(mine, weight), comm_);
  return options.bias() ? out + bias : out;
}

// ---- ParallelMlp

ParallelMlpImpl::ParallelMlpImpl(ParallelMlpOptions options_, std::shared_ptr<Communicator> comm)
    : options(options_), comm_(std::move(comm)) {
  reset();
}

void ParallelMlpImpl::reset() {
  fc1 = register_module(
      "fc1", ColumnParallelLinear(ColumnParallelLinearOptions(options.width(), options.hidden()), comm_));
  fc2 = register_module(
      "fc2", RowParallelLinear(RowParallelLinearOptions(options.hidden(), options.width()), comm_));
}

Tensor ParallelMlpImpl::forward(const Tensor& input) {
  return fc2(::torch::gelu(fc1(input)));
}

// ---- ParallelAttention

ParallelAttentionImpl::ParallelAttentionImpl(ParallelAttentionOptions options_,
                                             std::shared_ptr<Communicator> comm)
    : options(options_), comm_(std::move(comm)) {
  reset();
}

void ParallelAttentionImpl::reset() {
  const std::int64_t width = options.width(), heads = options.heads();
  GYRE_ARG_CHECK(heads >= 1 && width >= 1 && width % heads == 0, "tensor parallel: ParallelAttention's ",
                 heads, " heads do not divide its width ", width);
  const std::int64_t local = share(heads, comm_, "ParallelAttention's heads") * (width / heads);
  in_proj_weight = register_parameter("in_proj_weight", ::torch::empty({3 * local, width}));
  in_proj_bias = register_parameter("in_proj_bias", ::torch::empty({3 * local}));
  out_proj = register_module("out_proj", RowParallelLinear(RowParallelLinearOptions(width, width), comm_));
  // As torch::nn::MultiheadAttention initialises itself: the output projection drawn as a Linear
  // (above), the input projections Xavier-uniform, both biases zero.
  Tensor inWeight = ::torch::empty({3 * width, width});
  ::torch::nn::init::xavier_uniform_(inWeight);
  loadInProj(inWeight, ::torch::zeros({3 * width}));
  ::torch::NoGradGuard noGrad;
  out_proj->bias.zero_();
}

void ParallelAttentionImpl::loadShard(const Tensor& inProjWeight, const Tensor& inProjBias,
                                      const Tensor& outWeight, const Tensor& outBias) {
  loadInProj(inProjWeight, inProjBias);
  out_proj->loadShard(outWeight, outBias);
}

void ParallelAttentionImpl::loadInProj(const Tensor& inProjWeight, const Tensor& inProjBias) {
  const std::int64_t width = options.width();
  checkShape(inProjWeight, {3 * width, width}, "ParallelAttention's full in_proj_weight");
  checkShape(inProjBias, {3 * width}, "ParallelAttention's full in_proj_bias");
  const std::int64_t local = in_proj_weight.size(0) / 3;
  const std::int64_t begin = groupRank(comm_) * local;
  std::vector<Tensor> weights, biases;
  for (int part = 0; part < 3; ++part) {  // this rank's queries, keys and values
    weights.push_back(inProjWeight.narrow(0, part * width + begin, local));
    biases.push_back(inProjBias.narrow(0, part * width + begin, local));
  }
  ::torch::NoGradGuard noGrad;
  in_proj_weight.copy_(::torch::cat(weights));
  in_proj_bias.copy_(::torch::cat(biases));
}

Tensor ParallelAttentionImpl::forward(const Tensor& input) {
  GYRE_ARG_CHECK(input.dim() == 3 && input.size(2) == options.width(),
                 "ParallelAttention: the input must be ", "[batch, sequence, ", options.width(), "], not ",
                 input.sizes());
  const std::int64_t batch = input.size(0), sequence = input.size(1);
  const std::int64_t headDim = options.width() / options.heads();
  const std::int64_t local = in_proj_weight.size(0) / 3;  // this rank's heads × headDim
  const Tensor qkv =
      ::torch::nn::functional::linear(copyToTensorParallel(input, comm_), in_proj_weight, in_proj_bias);
  // [batch, sequence, local] each → [batch, heads here, sequence, headDim]
  const auto heads = [&](const Tensor& t) { return t.view({batch, sequence, -1, headDim}).transpose(1, 2); };
  const auto parts = qkv.split(local, -1);
  const Tensor q = heads(parts[0]) / std::sqrt(static_cast<double>(headDim));
  const Tensor attention = ::torch::softmax(::torch::matmul(q, heads(parts[1]).transpose(-2, -1)), -1);
  const Tensor context =
      ::torch::matmul(attention, heads(parts[2])).transpose(1, 2).reshape({batch, sequence, local});
  return out_proj(context);
}

}  // namespace gyre::torch
