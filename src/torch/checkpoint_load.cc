// Finding, verifying and loading checkpoints; the generator's state.
#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "gyre/errors.h"
#include "gyre/torch/checkpoint.h"
#include "torch/checkpoint_files.h"
#include "torch/optimizer_bytes.h"

namespace gyre::torch {
namespace {

constexpr const char* kRequired[] = {"model.pt", "optimizer.pt", "torch_rng.bin", "state.json"};

// state.json's contents; throws nlohmann::json::exception when it is not what save() writes.
CheckpointState parseState(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  CheckpointState s;
  s.step = j.at("step").get<std::int64_t>();
  s.epoch = j.at("epoch").get<std::int64_t>();
  s.sampler.epoch = j.at("sampler").at("epoch").get<std::int64_t>();
  s.sampler.index = j.at("sampler").at("index").get<std::int64_t>();
  s.scheduleStep = j.at("schedule").at("step").get<std::int64_t>();
  s.lr = j.at("schedule").at("lr").get<double>();
  for (const auto& [key, value] : j.at("values").items()) s.values[key] = value.get<std::string>();
  s.config = j.at("config").get<std::string>();
  return s;
}

// Module::load's walk, but copying each saved tensor into the module's own (libtorch's set_() would
// give the tensor the archive's storage, and views of the old one, as DistributedOptimizer's
// buckets and FullyShardedModel's shards, would keep the values from before). `where` names the
// module for the message of a tensor whose shape differs.
void loadInPlace(::torch::nn::Module& module, ::torch::serialize::InputArchive& archive, const std::string& where) {
  ::torch::NoGradGuard noGrad;
  auto copyInto = [&](const std::string& key, ::torch::Tensor& tensor, bool isBuffer) {
    ::torch::Tensor saved;
    archive.read(key, saved, isBuffer);
    if (!tensor.defined()) {
      tensor = saved;
      return;
    }
    if (saved.sizes() != tensor.sizes())
      throw InvalidArgument(where + key + " has the shape " + c10::str(saved.sizes()) + " in the checkpoint and " +
                            c10::str(tensor.sizes()) + " in this model");
    tensor.copy_(saved);
  };
  for (auto& p : module.named_parameters(/*recurse=*/false)) copyInto(p.key(), p.value(), false);
  for (auto& b : module.named_buffers(/*recurse=*/false)) copyInto(b.key(), b.value(), true);
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    ::torch::serialize::InputArchive inner;
    archive.read(child.key(), inner);
    loadInPlace(*child.value(), inner, where + child.key() + ".");
  }
}

void printSkip(const std::string& path, const std::string& reason) {
  std::fprintf(stderr, "gyre: skipping checkpoint %s: %s\n", path.c_str(), reason.c_str());
}

}  // namespace

std::string verifyCheckpoint(const std::string& path) {
  return detail::verifyDirectory(path);
}

namespace {

// Loads the checkpoint directory `info` into `model` and `optimizer` (may be null), or returns
// nullopt with `problem` saying why it is invalid. Throws what loadLatestCheckpoint says.
std::optional<LoadedCheckpoint> loadValid(const CheckpointInfo& info, ::torch::nn::Module& model,
                                          ::torch::optim::Optimizer* optimizer, const LoadOptions& options,
                                          std::string& problem) {
  std::map<std::string, std::string> files;
  problem = detail::verifyDirectory(info.path, &files);
  for (const char* name : kRequired)
    if (problem.empty() && files.count(name) == 0) problem = std::string(detail::kManifestName) + " lists no " + name;
  LoadedCheckpoint loaded;
  if (problem.empty()) {
    try {
      loaded.state = parseState(files["state.json"]);
      if (loaded.state.step != info.step)
        problem = "state.json: step " + std::to_string(loaded.state.step) + " in a directory of step " +
                  std::to_string(info.step);
    } catch (const nlohmann::json::exception& e) {
      problem = std::string("state.json: not what a checkpoint holds (") + e.what() + ")";
    }
  }
  if (!problem.empty()) return std::nullopt;
  if (options.accept) options.accept(loaded.state, info.path);
  // Verified: from here on a failure means the checkpoint does not fit this model or optimizer.
  try {
    ::torch::serialize::InputArchive archive;
    archive.load_from(files["model.pt"].data(), files["model.pt"].size());
    loadInPlace(model, archive, "");
    if (optimizer != nullptr) loadOptimizerStateBytes(*optimizer, files["optimizer.pt"], "the checkpoint's optimizer");
  } catch (const c10::Error& e) {
    throw InvalidArgument("checkpoint " + info.path +
                          " does not fit this model or optimizer: " + e.what_without_backtrace());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("checkpoint " + info.path + " does not fit this model: " + e.what());
  }
  loaded.torchRngState = std::move(files["torch_rng.bin"]);
  if (options.restoreRng) setTorchRngState(loaded.torchRngState);
  loaded.path = info.path;
  return loaded;
}

}  // namespace

std::optional<LoadedCheckpoint> loadLatestCheckpoint(const std::string& dir, ::torch::nn::Module& model,
                                                     ::torch::optim::Optimizer* optimizer,
                                                     const LoadOptions& options) {
  const auto& skip = options.onSkip ? options.onSkip : printSkip;
  const std::vector<CheckpointInfo> all = listCheckpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    std::string problem;
    if (auto loaded = loadValid(*it, model, optimizer, options, problem)) return loaded;
    skip(it->path, problem);
  }
  return std::nullopt;
}

LoadedCheckpoint loadCheckpoint(const CheckpointInfo& checkpoint, ::torch::nn::Module& model,
                                ::torch::optim::Optimizer* optimizer, const LoadOptions& options) {
  std::string problem;
  std::optional<LoadedCheckpoint> loaded = loadValid(checkpoint, model, optimizer, options, problem);
  if (!loaded) throw InvalidArgument("checkpoint " + checkpoint.path + " is not valid: " + problem);
  return std::move(*loaded);
}

std::string torchRngState() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor state = generator.get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), static_cast<std::size_t>(state.nbytes()));
}

void setTorchRngState(const std::string& bytes) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  const std::int64_t expected = generator.get_state().numel();
  if (static_cast<std::int64_t>(bytes.size()) != expected)
    throw InvalidArgument("the saved generator state has " + std::to_string(bytes.size()) + " bytes, not " +
                          std::to_string(expected));
  at::Tensor state = ::torch::empty({expected}, ::torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  generator.set_state(state);
}

}  // namespace gyre::torch
