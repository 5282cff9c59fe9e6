#include "gyre/torch/sync_batch_norm.h"

#include <cstdint>
#include <vector>

#include "common/check.h"

namespace gyre::torch {
namespace {

using ::torch::Tensor;
using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

// A per-channel [C] tensor shaped to broadcast against x: [1, C, 1, ...].
Tensor perChannel(const Tensor& t, const Tensor& x) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  shape[1] = t.size(0);
  return t.view(shape);
}

// Sums a float64 tensor over the communicator's ranks, in place.
void sumOverRanks(Communicator* comm, Tensor& t) {
  if (comm == nullptr || comm->size() == 1) return;
  t = t.contiguous();
  comm->allreduce(t.data_ptr<double>(), t.data_ptr<double>(), static_cast<std::size_t>(t.numel()),
                  {DataType::kFloat64});
}

// Training-mode batch normalisation over every rank's batch, on libtorch's fused CPU kernels:
// each rank's per-channel mean and variance (Welford), combined over the ranks in float64; the
// output is the inference kernel with the global statistics; backward is the inference backward
// (dy * w * invstd, and this rank's weight and bias gradients) corrected by the two global
// per-channel means the batch statistics add. The communicator travels as an integer
// (autograd's saved data holds IValues); the module that owns it outlives the graph.
struct SyncBatchNormFunction : public ::torch::autograd::Function<SyncBatchNormFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const Tensor& weight, const Tensor& bias,
                        Tensor runningMean, Tensor runningVar, double eps, double momentum,
                        std::int64_t comm) {
    auto* c = reinterpret_cast<Communicator*>(comm);
    const std::int64_t channels = input.size(1);
    // Per channel, summed over the ranks: n * mean and n * (var + mean^2) (the sum of squares),
    // then the element count n. A rank with an empty batch adds nothing.
    const double local = static_cast<double>(input.numel() / channels);
    Tensor stats = ::torch::zeros({2 * channels + 1}, ::torch::kFloat64);
    if (local > 0) {
      const auto [localMean, localVar] = ::at::batch_norm_update_stats(input, {}, {}, 0);
      const Tensor mean64 = localMean.to(::torch::kFloat64);
      stats = ::torch::cat({mean64 * local, (localVar.to(::torch::kFloat64) + mean64.square()) * local,
                            ::torch::full({1}, local, ::torch::kFloat64)});
    }
    sumOverRanks(c, stats);
    const double n = stats[2 * channels].item<double>();
    GYRE_ARG_CHECK(
        n > 1, "SyncBatchNorm: a training batch needs more than one value per channel over all ranks (got ",
        n, ")");
    const Tensor mean = stats.slice(0, 0, channels) / n;
    const Tensor var = (stats.slice(0, channels, 2 * channels) / n - mean.square()).clamp_min(0);
    runningMean.mul_(1 - momentum).add_(mean.to(runningMean.scalar_type()), momentum);
    runningVar.mul_(1 - momentum).add_((var * (n / (n - 1))).to(runningVar.scalar_type()), momentum);

    const auto type = input.scalar_type();
    const Tensor mean32 = mean.to(type), var32 = var.to(type);
    ctx->save_for_backward({input, weight, mean32, var32});
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["count"] = n;
    ctx->saved_data["eps"] = eps;
    return ::at::batch_norm(input, weight, bias, mean32, var32, /*training=*/false, 0, eps,
                            /*cudnn_enabled=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& input = saved[0];
    const Tensor& weight = saved[1];
    const Tensor& mean = saved[2];
    const Tensor& var = saved[3];
    auto* c = reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    const double n = ctx->saved_data["count"].toDouble();
    const double eps = ctx->saved_data["eps"].toDouble();
    const std::int64_t channels = input.size(1);
    // dy * w * invstd, and this rank's sums of dy * xhat (its weight gradient) and of dy (its bias
    // gradient): DistributedOptimizer averages those two over the ranks.
    auto [dx, gradWeight, gradBias] = ::at::native_batch_norm_backward(
        grads[0].contiguous(), input, weight, mean, var, {}, {}, /*train=*/false, eps, {true, true, true});
    Tensor global = ::torch::cat({gradBias.to(::torch::kFloat64), gradWeight.to(::torch::kFloat64)});
    sumOverRanks(c, global);
    // dx -= w * invstd * (mean(dy) + xhat * mean(dy * xhat)), the means over the global batch:
    // dx -= k1 * x + k0, with k1 = w * invstd^2 * mean(dy * xhat), k0 = w * invstd * mean(dy) - mean * k1.
    const auto type = input.scalar_type();
    const Tensor invstd = (var.to(::torch::kFloat64) + eps).rsqrt();
    const Tensor w = weight.to(::torch::kFloat64);
    const Tensor k1 = w * invstd.square() * (global.slice(0, channels, 2 * channels) / n);
    const Tensor k0 = w * invstd * (global.slice(0, 0, channels) / n) - mean.to(::torch::kFloat64) * k1;
    dx.addcmul_(input, perChannel((-k1).to(type), input)).sub_(perChannel(k0.to(type), input));
    return {dx, gradWeight, gradBias, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

SyncBatchNormOptions::SyncBatchNormOptions(std::int64_t numFeatures) : num_features_(numFeatures) {}

SyncBatchNormImpl::SyncBatchNormImpl(SyncBatchNormOptions options_) : options(options_) {
  reset();
}

void SyncBatchNormImpl::reset() {
  const std::int64_t c = options.num_features();
  GYRE_ARG_CHECK(c >= 1, "SyncBatchNorm: num_features must be at least 1 (got ", c, ")");
  GYRE_ARG_CHECK(std::isfinite(options.eps()) && options.eps() > 0,
                 "SyncBatchNorm: eps must be positive (got ", options.eps(), ")");
  GYRE_ARG_CHECK(options.momentum() >= 0 && options.momentum() <= 1,
                 "SyncBatchNorm: momentum must be in [0, 1] (got ", options.momentum(), ")");
  weight = register_parameter("weight", ::torch::ones({c}));
  bias = register_parameter("bias", ::torch::zeros({c}));
  running_mean = register_buffer("running_mean", ::torch::zeros({c}));
  running_var = register_buffer("running_var", ::torch::ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", ::torch::tensor(0, ::torch::kLong));
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "gyre::torch::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=" << options.momentum() << ")";
}

Tensor SyncBatchNormImpl::forward(const Tensor& in) {
  GYRE_ARG_CHECK(in.dim() >= 2 && in.size(1) == options.num_features(), "SyncBatchNorm: expected [N, ",
                 options.num_features(), ", ...], got ", in.sizes());
  // In the weights' type (float32 under bf16 autocast, where libtorch's batch norm runs in it too).
  const Tensor input = in.scalar_type() == weight.scalar_type() ? in : in.to(weight.scalar_type());
  if (!is_training()) {
    const Tensor scale = (running_var + options.eps()).rsqrt() * weight;
    return (input - perChannel(running_mean, input)) * perChannel(scale, input) + perChannel(bias, input);
  }
  {
    ::torch::NoGradGuard noGrad;
    num_batches_tracked.add_(1);
  }
  return SyncBatchNormFunction::apply(input, weight, bias, running_mean, running_var, options.eps(),
                                      options.momentum(), reinterpret_cast<std::int64_t>(comm_.get()));
}

int setSyncBatchNormCommunicator(::torch::nn::Module& module, const std::shared_ptr<Communicator>& comm) {
  int found = 0;
  if (auto* bn = dynamic_cast<SyncBatchNormImpl*>(&module)) {
    bn->setCommunicator(comm);
    ++found;
  }
  for (const auto& child : module.modules(/*include_self=*/false)) {
    if (auto* bn = dynamic_cast<SyncBatchNormImpl*>(child.get())) {
      bn->setCommunicator(comm);
      ++found;
    }
  }
  return found;
}

}  // namespace gyre::torch
