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
#include "gyre/torch/deferred.h"
#include "gyre/torch/flat_state.h"
#include "gyre/torch/pipeline.h"
#include "train/checkpoint_rules.h"
#include "train/optimizer_choice.h"
#include "train/vit_parallel.h"

namespace gyre::train {
namespace fs = std::filesystem;
namespace {

// The directories of one replica's `n` parts: DIR/rank-0 .. rank-(n-1) when split, else DIR.
std::vector<std::string> partDirs(const std::string& dir, int n, bool split) {
  if (!split) return {dir};
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(splitCheckpointDir(dir, r));
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

// What the parts of a saved layout hold, put back together.
struct WholeState {
  StartPoint start;
  std::string rng;
  std::vector<gyre::torch::ParamStatePtr> states;  // per parameter of the whole model
};

// What a --tp layout's parts hold of each parameter of the whole model: each tensor-parallel
// rank's share of its value and of its optimizer state (from the stage that trained it).
struct SharesRead {
  std::vector<std::vector<::torch::Tensor>> values;             // [param][tp rank]
  std::vector<std::vector<gyre::torch::ParamStatePtr>> states;  // [tp rank][param]
};

// The stages of `whole` that pipeline rank `stage` trained, all of it when unsplit.
std::vector<::torch::nn::Sequential> stagesTrainedBy(const CheckpointConfig& config, const std::vector<int>& balance,
                                                     int stage, ::torch::nn::Sequential whole) {
  return config.pp > 1 ? gyre::torch::stagesOf(whole, balance, stage, config.pp)
                       : std::vector<::torch::nn::Sequential>{whole};
}

// Part `r`'s pipeline stage (layout.h's order: tensor-parallel ranks innermost, then the stages).
int stageOfPart(const CheckpointConfig& config, int r) { return r / config.tp % config.pp; }

// Whether the parts hold ZeRO's flats: --zero with more than one replica to shard over.
bool savedFlats(const CheckpointConfig& config) { return config.zero > 0 && config.world / (config.pp * config.tp) > 1; }

// A ZeRO part's flats: the shard_layout its state.json records.
gyre::torch::FlatLayout savedShardLayout(const gyre::torch::CheckpointInfo& part, const std::string& dir) {
  const std::string text = savedCheckpointValue(part.path, kShardLayoutValue);
  GYRE_USAGE_CHECK(!text.empty(), "--checkpoint-dir ", dir, " holds ZeRO checkpoints that do not say where their ",
                   "shards lie (", part.path, ", saved before checkpoints recorded it): resume them on the layout ",
                   "that saved them");
  return gyre::torch::parseFlatLayout(text);
}

// A ZeRO part's flat tensors, zeros of the sizes its shard_layout gives: what its optimizer (and,
// with --zero 3, its module of shards, unit0, unit1, ...) loads into.
struct PartFlats {
  gyre::torch::FlatLayout layout;
  std::vector<::torch::Tensor> flats;
  std::shared_ptr<::torch::nn::Module> shards = std::make_shared<::torch::nn::Module>("Shards");
};
PartFlats partFlats(const gyre::torch::CheckpointInfo& part, const std::string& dir, int zero) {
  PartFlats out{savedShardLayout(part, dir), {}};
  for (std::size_t k = 0; k < out.layout.size(); ++k) {
    out.flats.push_back(::torch::zeros({out.layout[k].numel}));
    if (zero == 3) out.shards->register_parameter("unit" + std::to_string(k), out.flats.back());
  }
  return out;
}

// Part `r` of a --tp layout (tensor-parallel rank r % T of stage r / T % P): its shares of the
// values and optimizer state of the whole model's parameters that its stages hold, into `read`.
// The part loads into a module shaped as its share (tensorParallelVitShapes) and an optimizer over
// its stages' parameters there, in the order the part's own optimizer had them, or, with --zero 1
// and 2 beside --tp, over the flats of the replicas' parts of them (whose pieces name the share's
// parameters, in the share's order: the whole model's).
void readTensorParallelPart(const TrainOptions& o, const CheckpointConfig& config, const std::vector<int>& balance,
                            int r, const gyre::torch::CheckpointInfo& part, const gyre::torch::LoadOptions& load,
                            ::torch::nn::Sequential whole, SharesRead& read, gyre::torch::LoadedCheckpoint& loaded) {
  const int t = r % config.tp;
  const std::shared_ptr<::torch::nn::Module> shapes = tensorParallelVitShapes(whole, config.tp, t);
  const auto named = shapes->named_parameters();
  // What the part saved: beside --pp its stages' shares (under the layers' names, which the
  // shares keep), or all of its shares (as parts saved by earlier versions did beside --pp too).
  std::shared_ptr<::torch::nn::Module> saved = shapes;
  if (config.pp > 1) {
    saved = std::make_shared<::torch::nn::Module>("StageShares");
    const auto layers = shapes->named_children();
    const auto stage = gyre::torch::namedStageLayers(whole, balance, stageOfPart(config, r), config.pp);
    for (const auto& layer : stage->named_children()) saved->register_module(layer.key(), layers[layer.key()]);
  }
  const std::vector<TensorShare> shares = tensorParallelVitShares(whole);
  const std::unordered_map<const void*, std::size_t> index = gyre::torch::parameterIndex(whole->parameters());
  std::vector<std::size_t> trained;  // whole-model indices, in the part's optimizer's order
  std::vector<::torch::Tensor> params;
  for (const ::torch::Tensor& p : parametersOf(stagesTrainedBy(config, balance, stageOfPart(config, r), whole))) {
    trained.push_back(index.at(p.unsafeGetTensorImpl()));
    params.push_back(named[shares[trained.back()].name]);
  }
  std::vector<gyre::torch::ParamStatePtr>& states = read.states[static_cast<std::size_t>(t)];
  if (savedFlats(config)) {
    const PartFlats flats = partFlats(part, o.checkpointDir, config.zero);
    const std::shared_ptr<::torch::optim::Optimizer> partOptimizer = makeOptimizer(o, flats.flats, o.lr);
    loaded = gyre::torch::loadCheckpoint(part, *saved, partOptimizer.get(), load);
    gyre::torch::gatherFlatStates(*partOptimizer, flats.layout, shapes->parameters(), states);
  } else {
    const std::shared_ptr<::torch::optim::Optimizer> partOptimizer = makeOptimizer(o, params, o.lr);
    loaded = gyre::torch::loadCheckpoint(part, *saved, partOptimizer.get(), load);
    for (std::size_t k = 0; k < trained.size(); ++k)
      if (const auto it = partOptimizer->state().find(c10::guts::to_string(params[k].unsafeGetTensorImpl()));
          it != partOptimizer->state().end())
        states[trained[k]] = it->second->clone();
  }
  for (std::size_t k = 0; k < trained.size(); ++k)
    read.values[trained[k]][static_cast<std::size_t>(t)] = params[k].detach().clone();
}

// The whole model's values and states from every tensor-parallel rank's shares (a parameter's
// state only where every rank had one).
void joinTensorParallelShares(const SharesRead& read, ::torch::nn::Sequential whole,
                              std::vector<gyre::torch::ParamStatePtr>& states) {
  const std::vector<TensorShare> shares = tensorParallelVitShares(whole);
  const std::vector<::torch::Tensor> params = whole->parameters();
  ::torch::NoGradGuard noGrad;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const TensorCut cut = shares[k].cut;
    params[k].copy_(joinShares(read.values[k], cut));
    std::vector<const ::torch::optim::OptimizerParamState*> parts;
    for (const std::vector<gyre::torch::ParamStatePtr>& rank : read.states)
      if (rank[k]) parts.push_back(rank[k].get());
    if (parts.size() == read.states.size())
      states[k] = gyre::torch::joinParamStates(parts, [cut](const auto& pieces) { return joinShares(pieces, cut); });
  }
}

// Reads part `r` of a saved layout into `states` (its optimizer state) and its values: unsplit
// ZeRO's into `whole`, a pipeline stage's (or the unsplit model's) into `trained`, (the model's
// tensor, its value), to be put in place once every part has loaded (each part's load overwrites
// the whole, or, parts saved before 2026-12-03, a stage's part did).
void readPart(const TrainOptions& o, const CheckpointConfig& config, const std::vector<int>& balance, int r,
              const gyre::torch::CheckpointInfo& part, const gyre::torch::LoadOptions& load,
              ::torch::nn::Sequential whole, std::vector<gyre::torch::ParamStatePtr>& states,
              std::vector<std::pair<::torch::Tensor, ::torch::Tensor>>& trained,
              gyre::torch::LoadedCheckpoint& loaded) {
  const std::vector<::torch::Tensor> params = whole->parameters();
  const int stage = stageOfPart(config, r);
  const std::vector<::torch::nn::Sequential> stages = stagesTrainedBy(config, balance, stage, whole);
  // What the part saved of the model: its stages' layers (a pipeline's), or the whole model.
  const std::shared_ptr<::torch::nn::Module> saved =
      config.pp > 1 ? gyre::torch::namedStageLayers(whole, balance, stage, config.pp) : whole.ptr();
  if (savedFlats(config)) {
    // Flat shards of the whole model's parameters (of its stages' with --pp): --zero 1 and 2 save
    // the model beside them, --zero 3 only its shards.
    const PartFlats flats = partFlats(part, o.checkpointDir, config.zero);
    const std::shared_ptr<::torch::optim::Optimizer> partOptimizer = makeOptimizer(o, flats.flats, o.lr);
    loaded = gyre::torch::loadCheckpoint(part, config.zero == 3 ? *flats.shards : *saved, partOptimizer.get(), load);
    if (config.zero == 3) gyre::torch::gatherFlatValues(flats.flats, flats.layout, params);
    if (config.pp > 1)
      for (const ::torch::Tensor& t : tensorsOf(stages)) trained.emplace_back(t, t.detach().clone());
    gyre::torch::gatherFlatStates(*partOptimizer, flats.layout, params, states);
    return;
  }
  // An unsplit model, or stage r of a pipeline: the layers it trained (all a part holds, or the
  // whole model, as parts saved before 2026-12-03 did), and their optimizer state.
  const std::shared_ptr<::torch::optim::Optimizer> partOptimizer = makeOptimizer(o, parametersOf(stages), o.lr);
  loaded = gyre::torch::loadCheckpoint(part, *saved, partOptimizer.get(), load);
  for (const ::torch::Tensor& t : tensorsOf(stages)) trained.emplace_back(t, t.detach().clone());
  const std::unordered_map<const void*, std::size_t> index = gyre::torch::parameterIndex(params);
  for (const ::torch::Tensor& p : gyre::torch::optimizerParameters(*partOptimizer))
    if (const auto it = partOptimizer->state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
        it != partOptimizer->state().end())
      states[index.at(p.unsafeGetTensorImpl())] = it->second->clone();
}

WholeState readWholeState(const TrainOptions& o, const SavedLayout& saved, const std::string& current,
                          ::torch::nn::Sequential whole) {
  // Another model would not even cut into the saved stages: say what differs first.
  if (std::string why = checkpointIncompatibility(saved.config, current, saved.dir); !why.empty())
    throw InvalidArgument(why);
  const CheckpointConfig config = parseCheckpointConfig(saved.config).value();  // checked just now
  std::vector<int> balance;
  if (config.pp > 1) {
    GYRE_USAGE_CHECK(config.stageLayers.has_value(), "--checkpoint-dir ", o.checkpointDir,
                     " holds a pipeline's checkpoints that do not say how its stages were cut (saved before "
                     "checkpoints recorded it): resume them on the layout that saved them");
    balance = *config.stageLayers;
  }
  // One replica's parts: a pipeline's stages (each split over --tp's ranks), ZeRO's every rank, or
  // the one unsplit directory.
  const int replicaParts = config.pp * config.tp;
  const std::vector<std::string> dirs =
      config.zero > 0 ? partDirs(saved.dir, config.world, true) : partDirs(saved.dir, replicaParts, replicaParts > 1);
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
  WholeState out;
  out.states.resize(whole->parameters().size());
  std::vector<std::pair<::torch::Tensor, ::torch::Tensor>> trained;
  SharesRead shares;
  if (config.tp > 1) {
    shares.values.assign(out.states.size(), std::vector<::torch::Tensor>(static_cast<std::size_t>(config.tp)));
    shares.states.resize(static_cast<std::size_t>(config.tp));
    for (auto& rank : shares.states) rank.resize(out.states.size());
  }
  for (int r = 0; r < static_cast<int>(dirs.size()); ++r) {
    gyre::torch::LoadedCheckpoint loaded;
    const gyre::torch::CheckpointInfo& part = parts[static_cast<std::size_t>(r)];
    if (config.tp > 1) {
      readTensorParallelPart(o, config, balance, r, part, load, whole, shares, loaded);
    } else {
      readPart(o, config, balance, r, part, load, whole, out.states, trained, loaded);
    }
    if (r == 0) {
      out.start = {loaded.state.step, loaded.state.sampler.epoch, loaded.state.sampler.index, loaded.path};
      out.rng = loaded.torchRngState;
      GYRE_USAGE_CHECK(loaded.state.sampler.index % o.batch == 0, "checkpoint ", loaded.path,
                       ": its sampler position ", loaded.state.sampler.index, " is not a whole number of --batch ",
                       o.batch, " steps");
    }
  }
  if (config.tp > 1) joinTensorParallelShares(shares, whole, out.states);
  ::torch::NoGradGuard noGrad;
  for (auto& [tensor, value] : trained) tensor.copy_(value);
  return out;
}

}  // namespace

StartPoint loadOnThisLayout(const TrainOptions& o, const SavedLayout& saved, const std::string& current,
                            const ResumeTarget& target, ::torch::optim::Optimizer& optimizer) {
  // A pipeline's worker holds only its stages (deferred.h), of the whole model or of its share:
  // the other layers get memory while the parts load, and the trainer gives it back after.
  gyre::torch::materialiseParameters(*target.whole.ptr());
  if (target.share) gyre::torch::materialiseParameters(*target.share->model.ptr());  // beside --pp
  const WholeState state = readWholeState(o, saved, current, target.whole);
  const std::vector<::torch::Tensor> params = target.whole->parameters();
  if (target.share) {
    // This rank's shares of the values and of each state, cut from the whole.
    const ResumeTarget::TensorParallelShare& share = *target.share;
    loadTensorParallelVit(share.model, target.whole, share.ranks, share.rank);
    // The share's parameters are the whole model's, in its order (vit_parallel.h).
    const std::vector<TensorShare> shares = tensorParallelVitShares(target.whole);
    const std::vector<::torch::Tensor> shareParams = share.model->parameters();
    std::vector<gyre::torch::ParamStatePtr> states(shareParams.size());
    for (std::size_t k = 0; k < shares.size(); ++k)
      if (const TensorShare& s = shares[k]; state.states[s.whole])
        states[k] = gyre::torch::mapParamState(*state.states[s.whole], [&](const ::torch::Tensor& t) {
          return cutShare(t, s.cut, share.ranks, share.rank);
        });
    if (target.flats) {
      // --zero 1 and 2 beside --tp: this rank's flats of its share, cut from the share's states.
      gyre::torch::setFlatStates(optimizer, *target.flats, shareParams, states);
    } else {
      const std::unordered_map<const void*, std::size_t> index = gyre::torch::parameterIndex(shareParams);
      for (const ::torch::Tensor& p : gyre::torch::optimizerParameters(optimizer))
        if (const auto it = index.find(p.unsafeGetTensorImpl()); it != index.end() && states[it->second])
          optimizer.state()[c10::guts::to_string(p.unsafeGetTensorImpl())] = std::move(states[it->second]);
    }
  } else if (target.flats) {
    // This rank's flats, cut from the whole.
    if (target.flatValues) gyre::torch::setFlatValues(gyre::torch::optimizerParameters(optimizer), *target.flats, params);
    gyre::torch::setFlatStates(optimizer, *target.flats, params, state.states);
  } else {
    // The state of each of this layout's parameters that has one.
    const std::unordered_map<const void*, std::size_t> index = gyre::torch::parameterIndex(params);
    for (const ::torch::Tensor& p : gyre::torch::optimizerParameters(optimizer))
      if (const auto it = index.find(p.unsafeGetTensorImpl()); it != index.end() && state.states[it->second])
        optimizer.state()[c10::guts::to_string(p.unsafeGetTensorImpl())] = state.states[it->second]->clone();
  }
  gyre::torch::setTorchRngState(state.rng);
  return state.start;
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
