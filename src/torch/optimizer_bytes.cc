#include "torch/optimizer_bytes.h"

#include "gyre/errors.h"

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
