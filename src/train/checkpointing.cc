#include "train/checkpointing.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"

namespace gyre::train {
namespace {

// What rank 0 tells the others about the start.
enum StartCode : std::int64_t { kFresh = 0, kResumed = 1, kRefused = 2, kFailed = 3 };

void broadcastString(Communicator& comm, std::string& text) {
  std::int64_t size = static_cast<std::int64_t>(text.size());
  comm.broadcast(&size, 1, {DataType::kInt64, 0});
  text.resize(static_cast<std::size_t>(size));
  if (size > 0) comm.broadcast(text.data(), text.size(), {DataType::kUInt8, 0});
}

// The flags a resumed run must share with the run that saved the checkpoint: the model, the
// global batch (the sampler's position counts global samples), the seed (the samples' order) and
// the optimizer (its state). "" when they match, else what differs.
std::string incompatibility(const std::string& saved, const std::string& current, const std::string& path) {
  const nlohmann::json a = nlohmann::json::parse(saved, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(current);
  if (!a.is_object()) return "checkpoint " + path + " was not saved by gyre train (no config in it)";
  for (const char* key : {"model", "sync_bn", "batch", "seed", "optimizer"}) {
    nlohmann::json was = a.value(key, nlohmann::json());
    // Saved before the flag existed: its default.
    if (was.is_null() && std::string_view(key) == "optimizer") was = "sgd";
    if (was.is_null() && std::string_view(key) == "sync_bn") was = false;
    if (was == b.at(key)) continue;
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return "checkpoint " + path + " was saved by a run with --" + flag + " " + was.dump() +
           ", this run has --" + flag + " " + b.at(key).dump() +
           ": resume with the same --model, --sync-bn, --batch, --seed and --optimizer (the number of "
           "workers "
           "may change)";
  }
  return "";
}

// An invalid checkpoint that a resume passed over is renamed to PATH.invalid: kept for a look, but
// out of the way of loading and of keepLast, which would otherwise count it as one to keep.
void setAside(const std::vector<std::string>& invalid) {
  for (const std::string& path : invalid) {
    std::error_code ec;
    std::filesystem::rename(path, path + ".invalid", ec);
    if (ec)
      std::fprintf(stderr, "gyre: warning: cannot rename the invalid checkpoint %s: %s\n", path.c_str(),
                   ec.message().c_str());
    else
      std::fprintf(stderr, "gyre: moved the invalid checkpoint aside to %s.invalid\n", path.c_str());
  }
}

}  // namespace

TrainCheckpoints::TrainCheckpoints(const TrainOptions& options, std::shared_ptr<Communicator> comm)
    : o_(options), comm_(std::move(comm)), rank_(comm_ ? comm_->rank() : 0) {}

TrainCheckpoints::~TrainCheckpoints() = default;

bool TrainCheckpoints::due(std::int64_t step) const {
  return enabled() && o_.checkpointEvery > 0 && step % o_.checkpointEvery == 0;
}

StartPoint TrainCheckpoints::start(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer,
                                   const std::string& config) {
  StartPoint start;
  if (!enabled()) return start;
  std::vector<std::int64_t> head = {kFresh, 0, 0, 0};
  std::string message;
  std::string rng;
  std::vector<std::string> invalid;
  gyre::torch::LoadOptions load;
  load.onSkip = [&invalid](const std::string& path, const std::string& reason) {
    std::fprintf(stderr, "gyre: skipping checkpoint %s: %s\n", path.c_str(), reason.c_str());
    invalid.push_back(path);
  };
  // A run with other flags is refused before the checkpoint is loaded: another optimizer's state
  // would not even load, and libtorch's message would not say why.
  load.accept = [&config](const gyre::torch::CheckpointState& state, const std::string& path) {
    if (const std::string why = incompatibility(state.config, config, path); !why.empty())
      throw InvalidArgument(why);
  };
  if (rank_ == 0) {
    try {
      if (!o_.resume) {
        for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(o_.checkpointDir)) {
          if (!c.complete) continue;
          head[0] = kRefused;
          message =
              "--checkpoint-dir " + o_.checkpointDir + " already holds checkpoints (" + c.path +
              ", ...): pass --resume to continue from the newest valid one, or choose another directory";
          break;
        }
      } else if (auto loaded = gyre::torch::loadLatestCheckpoint(o_.checkpointDir, model, &optimizer, load)) {
        if (loaded->state.sampler.index % o_.batch != 0)
          message = "checkpoint " + loaded->path + ": its sampler position " +
                    std::to_string(loaded->state.sampler.index) + " is not a whole number of --batch " +
                    std::to_string(o_.batch) + " steps";
        head = {message.empty() ? kResumed : kRefused, loaded->state.step, loaded->state.sampler.epoch,
                loaded->state.sampler.index};
        if (message.empty()) message = loaded->path;
        rng = std::move(loaded->torchRngState);
      }
    } catch (const InvalidArgument& e) {
      head[0] = kRefused;
      message = e.what();
    } catch (const std::exception& e) {
      head[0] = kFailed;
      message = e.what();
    }
    if (head[0] == kFresh || head[0] == kResumed) setAside(invalid);
  }
  if (comm_) {
    comm_->broadcast(head.data(), head.size(), {DataType::kInt64, 0});
    broadcastString(*comm_, message);
  }
  if (head[0] == kRefused) throw InvalidArgument(rank_ == 0 ? message : "rank 0 cannot resume: " + message);
  if (head[0] == kFailed) throw Error(rank_ == 0 ? message : "rank 0 cannot resume: " + message);
  if (head[0] == kResumed) {
    if (comm_ && comm_->size() > 1) {
      gyre::torch::broadcastParameters(model, *comm_);
      gyre::torch::broadcastOptimizerState(optimizer, *comm_);
      broadcastString(*comm_, rng);
      if (rank_ != 0) gyre::torch::setTorchRngState(rng);
    }
    start = {head[1], head[2], head[3], message};
  }
  if (rank_ == 0)
    writer_ = std::make_unique<gyre::torch::Checkpointer>(
        gyre::torch::CheckpointOptions{o_.checkpointDir, o_.keepLast});
  lastSaved_ = start.step;
  return start;
}

std::optional<CheckpointSave> TrainCheckpoints::save(const ::torch::nn::Module& model,
                                                     const ::torch::optim::Optimizer& optimizer,
                                                     const gyre::torch::CheckpointState& state) {
  lastSaved_ = state.step;
  if (!writer_) return std::nullopt;
  const gyre::torch::SaveStats stats = writer_->save(model, optimizer, state);
  return CheckpointSave{stats.step, stats.path, stats.bytes, stats.stallS};
}

void TrainCheckpoints::finish() {
  if (writer_) writer_->wait();
}

std::string keptJsonLines(const std::string& path, const std::function<bool(const nlohmann::json&)>& keep) {
  std::ifstream in(path);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && keep(j)) out += line + "\n";
  }
  return out;
}

}  // namespace gyre::train
