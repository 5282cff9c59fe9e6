#include "torch/optimizer_bytes.h"

#include "gyre/errors.h"
#include "gyre/torch/optimizers.h"

namespace gyre::torch {
namespace {

std::string groupKey(std::size_t group) { return "gyre_group_options_" + std::to_string(group); }

}  // namespace

std::string archiveBytes(::torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

std::string optimizerStateBytes(const ::torch::optim::Optimizer& optimizer) {
  ::torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    ::torch::serialize::OutputArchive options;
    optimizer.param_groups()[g].options().serialize(options);
    archive.write(groupKey(g), options);
  }
  return archiveBytes(archive);
}

std::size_t optimizerStateTensorBytes(const ::torch::optim::Optimizer& optimizer) {
  namespace optim = ::torch::optim;
  std::size_t bytes = 0;
  auto add = [&bytes](const ::torch::Tensor& t) {
    if (t.defined()) bytes += static_cast<std::size_t>(t.nbytes());
  };
  for (const auto& [key, state] : optimizer.state()) {
    const optim::OptimizerParamState* s = state.get();
    if (const auto* sgd = dynamic_cast<const optim::SGDParamState*>(s)) {
      add(sgd->momentum_buffer());
    } else if (const auto* adam = dynamic_cast<const optim::AdamParamState*>(s)) {
      add(adam->exp_avg());
      add(adam->exp_avg_sq());
      add(adam->max_exp_avg_sq());
    } else if (const auto* adamw = dynamic_cast<const optim::AdamWParamState*>(s)) {
      add(adamw->exp_avg());
      add(adamw->exp_avg_sq());
      add(adamw->max_exp_avg_sq());
    } else if (const auto* adagrad = dynamic_cast<const optim::AdagradParamState*>(s)) {
      add(adagrad->sum());
    } else if (const auto* rms = dynamic_cast<const optim::RMSpropParamState*>(s)) {
      add(rms->square_avg());
      add(rms->momentum_buffer());
      add(rms->grad_avg());
    } else if (const auto* lars = dynamic_cast<const LarsParamState*>(s)) {
      add(lars->momentum_buffer());
    } else if (const auto* lamb = dynamic_cast<const LambParamState*>(s)) {
      add(lamb->exp_avg());
      add(lamb->exp_avg_sq());
    } else {
      return optimizerStateBytes(optimizer).size();
    }
  }
  return bytes;
}

void loadOptimizerStateBytes(::torch::optim::Optimizer& optimizer, const std::string& bytes,
                             const std::string& source) {
  ::torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  // load() only adds and replaces: state of parameters the bytes have none for (momentum built
  // after an elastic commit taken before the first step) would survive it.
  optimizer.state().clear();
  optimizer.load(archive);
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    ::torch::serialize::InputArchive options;
    if (!archive.try_read(groupKey(g), options))
      throw InvalidArgument(source + " has fewer parameter groups than this one");
    optimizer.param_groups()[g].options().serialize(options);
  }
}

}  // namespace gyre::torch
