#include "train/checkpoint_relayout.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/checkpoint.h"
#include "gyre/torch/pipeline.h"
#include "train/checkpoint_rules.h"
#include "train/optimizer_choice.h"

namespace gyre::train {
namespace fs = std::filesystem;
namespace {

// The directories of one replica's parts: DIR/rank-0 .. rank-(P-1) of a pipeline, DIR unsplit.
std::vector<std::string> partDirs(const std::string& dir, int pp) {
  if (pp <= 1) return {dir};
  std::vector<std::string> out;
  for (int r = 0; r < pp; ++r) out.push_back(splitCheckpointDir(dir, r));
  return out;
}

// The checkpoints of the newest step that is complete and valid in every one of `dirs`, in their
// order; empty when there is none.
std::vector<gyre::torch::CheckpointInfo> newestStepOfEveryPart(const std::vector<std::string>& dirs) {
  std::map<std::int64_t, std::vector<gyre::torch::CheckpointInfo>> byStep;  // the parts that finished it
  for (const std::string& d : dirs)
    for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(d))
      if (c.complete) byStep[c.step].push_back(c);
  for (auto it = byStep.rbegin(); it != byStep.rend(); ++it) {
    const std::vector<gyre::torch::CheckpointInfo>& parts = it->second;
    if (parts.size() == dirs.size() &&
        std::all_of(parts.begin(), parts.end(), [](const auto& c) { return gyre::torch::verifyCheckpoint(c.path).empty(); }))
      return parts;
  }
  return {};
}

std::vector<::torch::Tensor> parametersOf(const std::vector<::torch::nn::Sequential>& stages) {
  std::vector<::torch::Tensor> out;
  for (const auto& s : stages)
    for (const ::torch::Tensor& p : s->parameters()) out.push_back(p);
  return out;
}

// Parameters and buffers of `stages`, in a fixed order.
std::vector<::torch::Tensor> tensorsOf(const std::vector<::torch::nn::Sequential>& stages) {
  std::vector<::torch::Tensor> out = parametersOf(stages);
  for (const auto& s : stages)
    for (const ::torch::Tensor& b : s->buffers()) out.push_back(b);
  return out;
}

}  // namespace

StartPoint loadOnThisLayout(const TrainOptions& o, const SavedLayout& saved, const std::string& current,
                            ::torch::nn::Sequential model, ::torch::optim::Optimizer& optimizer) {
  // Another model would not even cut into the saved stages: say what differs first.
  if (std::string why = checkpointIncompatibility(saved.config, current, saved.dir); !why.empty())
    throw InvalidArgument(why);
  const CheckpointConfig config = parseCheckpointConfig(saved.config).value();  // checked just now
  const int pp = config.pp;
  std::vector<int> balance;
  if (pp > 1) {
    GYRE_USAGE_CHECK(config.stageLayers.has_value(), "--checkpoint-dir ", o.checkpointDir,
                     " holds a pipeline's checkpoints that do not say how its stages were cut (saved before "
                     "checkpoints recorded it): resume them on the layout that saved them");
    balance = *config.stageLayers;
  }
  const std::vector<std::string> dirs = partDirs(saved.dir, pp);
  const std::vector<gyre::torch::CheckpointInfo> parts = newestStepOfEveryPart(dirs);
  GYRE_USAGE_CHECK(!parts.empty(), "--checkpoint-dir ", o.checkpointDir, " (", saved.dir, ")",
                   ": no step has a valid checkpoint of every part that its layout saved (", dirs.size(),
                   " part(s)), so it cannot be resumed on another layout");

  gyre::torch::LoadOptions load;
  load.restoreRng = false;
  load.accept = [&current](const gyre::torch::CheckpointState& state, const std::string& path) {
    if (std::string why = checkpointIncompatibility(state.config, current, path); !why.empty())
      throw InvalidArgument(why);
  };
  // Each part in turn into the whole model: what its stages hold is kept aside before the next
  // part overwrites it, and the optimizer state of its parameters is kept by parameter.
  std::vector<std::pair<::torch::Tensor, ::torch::Tensor>> trained;  // (the model's tensor, its value)
  // libtorch keys an optimizer's state by the parameter's TensorImpl address, as text.
  std::unordered_map<std::string, std::unique_ptr<::torch::optim::OptimizerParamState>> states;
  StartPoint start;
  std::string rng;
  for (int r = 0; r < static_cast<int>(dirs.size()); ++r) {
    const std::vector<::torch::nn::Sequential> stages =
        pp > 1 ? gyre::torch::stagesOf(model, balance, r, pp) : std::vector<::torch::nn::Sequential>{model};
    const std::shared_ptr<::torch::optim::Optimizer> partOptimizer = makeOptimizer(o, parametersOf(stages), o.lr);
    const gyre::torch::LoadedCheckpoint loaded =
        gyre::torch::loadCheckpoint(parts[static_cast<std::size_t>(r)], *model, partOptimizer.get(), load);
    for (const ::torch::Tensor& t : tensorsOf(stages)) trained.emplace_back(t, t.detach().clone());
    for (auto& [key, state] : partOptimizer->state()) states[key] = state->clone();
    if (r == 0) {
      start = {loaded.state.step, loaded.state.sampler.epoch, loaded.state.sampler.index, loaded.path};
      rng = loaded.torchRngState;
      GYRE_USAGE_CHECK(loaded.state.sampler.index % o.batch == 0, "checkpoint ", loaded.path,
                       ": its sampler position ", loaded.state.sampler.index, " is not a whole number of --batch ",
                       o.batch, " steps");
    }
  }
  {
    ::torch::NoGradGuard noGrad;
    for (auto& [tensor, value] : trained) tensor.copy_(value);
  }
  // This layout's optimizer: the state of each of its parameters that has one.
  for (const auto& group : optimizer.param_groups())
    for (const ::torch::Tensor& p : group.params())
      if (const auto it = states.find(c10::guts::to_string(p.unsafeGetTensorImpl())); it != states.end())
        optimizer.state()[it->first] = it->second->clone();
  gyre::torch::setTorchRngState(rng);
  return start;
}

std::string moveAside(const std::string& dir, const std::string& name) {
  fs::path target = fs::path(dir) / kEarlierLayouts / name;
  for (int n = 2; fs::exists(target); ++n) target = fs::path(dir) / kEarlierLayouts / (name + "-" + std::to_string(n));
  std::error_code ec;
  fs::create_directories(target, ec);
  if (ec) throw SystemError("cannot create " + target.string() + ": " + ec.message());
  std::vector<fs::path> moving;  // listed first: the directory changes as they go
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string entry = e.path().filename().string();
    if (entry.rfind("rank-", 0) == 0 || entry.rfind("ckpt-", 0) == 0) moving.push_back(e.path());
  }
  for (const fs::path& from : moving) {
    fs::rename(from, target / from.filename(), ec);
    if (ec) throw SystemError("cannot move " + from.string() + " to " + target.string() + ": " + ec.message());
  }
  return target.string();
}

}  // namespace gyre::train
