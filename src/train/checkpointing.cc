#include "train/checkpointing.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"
#include "train/checkpoint_relayout.h"
#include "train/checkpoint_rules.h"
#include "train/records.h"

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

// Runs `step` on this rank; a refusal (InvalidArgument) or failure becomes its code and message.
void attemptOnStart(const std::function<void()>& step, std::int64_t& code, std::string& message) {
  try {
    step();
  } catch (const InvalidArgument& e) {
    code = kRefused;
    message = e.what();
  } catch (const std::exception& e) {
    code = kFailed;
    message = e.what();
  }
}

// Every rank learns whether one refused (kRefused: InvalidArgument) or failed (kFailed: Error);
// then each throws, with its own message or one that points at the rank that has it.
void agreeOnStart(Communicator* comm, std::int64_t code, const std::string& message, const std::string& dir) {
  std::int64_t worst = code;
  if (comm) comm->allreduce(&worst, &worst, 1, {DataType::kInt64, ReduceOp::kMax});
  if (worst <= kResumed) return;
  const std::string why = code == worst ? message : "another rank cannot resume from " + dir;
  if (worst == kRefused) throw InvalidArgument(why);
  throw Error(why);
}

}  // namespace

TrainCheckpoints::TrainCheckpoints(const TrainOptions& options, std::shared_ptr<Communicator> comm)
    : o_(options),
      comm_(std::move(comm)),
      rank_(comm_ ? comm_->rank() : 0),
      split_(o_.pp > 1 || o_.tp > 1 || zeroStage(o_) > 0),
      dir_(split_ ? splitCheckpointDir(o_.checkpointDir, rank_) : o_.checkpointDir) {}

TrainCheckpoints::~TrainCheckpoints() = default;

bool TrainCheckpoints::due(std::int64_t step) const {
  return enabled() && o_.checkpointEvery > 0 && step % o_.checkpointEvery == 0;
}

StartPoint TrainCheckpoints::start(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer,
                                   const std::string& config, const ResumeTarget* target) {
  StartPoint start;
  if (!enabled()) return start;
  if (o_.resume && target) {
    // Worker 0 decides, so that every rank takes the same path (a shared file system may show
    // the ranks different states for a moment): convert, refuse, or the plain start.
    enum : std::int64_t { kPlain = 0, kConvert = 1, kSetAsideOnly = 2 };
    SavedLayout saved;
    std::int64_t how = kPlain;
    if (rank_ == 0) {
      saved = savedLayoutOf(o_.checkpointDir);
      how = resumesConverted(saved, config) ? kConvert : saved.earlier ? kSetAsideOnly : kPlain;
    }
    if (comm_) {
      comm_->broadcast(&how, 1, {DataType::kInt64, 0});
      if (how != kPlain) {
        broadcastString(*comm_, saved.dir);
        broadcastString(*comm_, saved.config);
        std::int64_t earlier = saved.earlier ? 1 : 0;
        comm_->broadcast(&earlier, 1, {DataType::kInt64, 0});
        saved.earlier = earlier != 0;
      }
    }
    if (how == kSetAsideOnly) throw InvalidArgument(setAsideOnlyMessage(o_.checkpointDir, saved.dir));
    if (how == kConvert) return startConverted(*target, optimizer, saved, config);
  }
  if (split_) return startSplit(model, optimizer, config);
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
    if (const std::string why = checkpointIncompatibility(state.config, config, path); !why.empty())
      throw InvalidArgument(why);
  };
  if (rank_ == 0) {
    try {
      GYRE_USAGE_CHECK(!std::filesystem::exists(splitCheckpointDir(o_.checkpointDir, 0)),
                       splitCheckpointsMessage(o_.checkpointDir));
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
  if (rank_ != 0) return std::nullopt;  // a split model's other parts: written, reported by rank 0
  return CheckpointSave{stats.step, stats.path, stats.bytes, stats.stallS};
}

void TrainCheckpoints::finish() {
  if (writer_) writer_->wait();
}

StartPoint TrainCheckpoints::startSplit(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer,
                                        const std::string& config) {
  StartPoint start;
  // Every rank looks at its own part: the complete, valid checkpoints it holds (newest first).
  constexpr std::size_t kSteps = 32;
  std::vector<std::int64_t> mine(kSteps, -1);
  std::int64_t code = kFresh;
  std::string message;
  auto attempt = [&](const std::function<void()>& step) { attemptOnStart(step, code, message); };
  attempt([&] {
    for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(o_.checkpointDir))
      if (c.complete)
        throw InvalidArgument(unsplitCheckpointsMessage(o_.checkpointDir, c.path));
    const std::vector<gyre::torch::CheckpointInfo> list = gyre::torch::listCheckpoints(dir_);
    std::size_t k = 0;
    for (auto it = list.rbegin(); it != list.rend() && k < kSteps; ++it) {
      if (!it->complete) continue;
      if (!o_.resume)
        throw InvalidArgument("--checkpoint-dir " + o_.checkpointDir + " already holds checkpoints (" + it->path +
                              ", ...): pass --resume to continue from the newest valid one, or choose another "
                              "directory");
      if (!gyre::torch::verifyCheckpoint(it->path).empty()) continue;
      // The layout first: parts of another split would find no common step, which says less.
      if (k == 0)
        if (const std::string saved = savedCheckpointConfig(it->path); !saved.empty())
          if (std::string why = checkpointLayoutMismatch(saved, config, it->path); !why.empty())
            throw InvalidArgument(why);
      mine[k++] = it->step;
    }
    // A rank beyond the layout that saved the parts finds none of its own: the parts of rank 0 say
    // which layout that was.
    if (o_.resume && k == 0 && rank_ > 0 && std::filesystem::exists(splitCheckpointDir(o_.checkpointDir, 0)) &&
        !std::filesystem::exists(dir_))
      throw InvalidArgument("--checkpoint-dir " + o_.checkpointDir + " holds no part for rank " +
                            std::to_string(rank_) + ": it was saved by fewer workers (resume it on the same layout)");
  });
  // Every rank learns whether one refused, and where they all stand.
  auto agree = [&] { agreeOnStart(comm_.get(), code, message, o_.checkpointDir); };
  agree();
  const int world = comm_ ? comm_->size() : 1;
  std::vector<std::int64_t> all(kSteps * static_cast<std::size_t>(world), -1);
  if (comm_) {
    comm_->allgather(mine.data(), all.data(), kSteps, {DataType::kInt64});
  } else {
    all = mine;
  }
  // The newest step whose part every rank holds valid.
  std::int64_t common = -1;
  bool any = false;
  for (std::int64_t step : mine) {
    if (step < 0 || step <= common) continue;
    bool everywhere = true;
    for (int r = 0; r < world && everywhere; ++r)
      everywhere = std::find(all.begin() + r * static_cast<std::ptrdiff_t>(kSteps),
                             all.begin() + (r + 1) * static_cast<std::ptrdiff_t>(kSteps), step) !=
                   all.begin() + (r + 1) * static_cast<std::ptrdiff_t>(kSteps);
    if (everywhere) common = step;
  }
  for (std::int64_t step : all) any = any || step >= 0;
  if (any) {
    if (common < 0)
      throw InvalidArgument("--checkpoint-dir " + o_.checkpointDir +
                            ": no step has a valid checkpoint from every rank (each rank keeps its part under "
                            "rank-<r>/): a split model resumes only from a step that every rank saved");
    attempt([&] {
      // Parts newer than the common step (a save that not every rank finished) go aside.
      std::vector<std::string> ahead;
      for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(dir_))
        if (c.step > common) ahead.push_back(c.path);
      setAside(ahead);
      gyre::torch::LoadOptions load;
      load.accept = [&config](const gyre::torch::CheckpointState& state, const std::string& path) {
        if (std::string why = checkpointIncompatibility(state.config, config, path); !why.empty())
          throw InvalidArgument(why);
        if (std::string why = checkpointLayoutMismatch(state.config, config, path); !why.empty())
          throw InvalidArgument(why);
      };
      const auto loaded = gyre::torch::loadLatestCheckpoint(dir_, model, &optimizer, load);
      GYRE_ENFORCE(loaded && loaded->state.step == common, "the checkpoint of step ", common, " in ", dir_,
                   " could not be loaded");
      GYRE_USAGE_CHECK(loaded->state.sampler.index % o_.batch == 0, "checkpoint ", loaded->path,
                       ": its sampler position ", loaded->state.sampler.index, " is not a whole number of --batch ",
                       o_.batch, " steps");
      code = kResumed;
      start = {loaded->state.step, loaded->state.sampler.epoch, loaded->state.sampler.index, loaded->path};
    });
    agree();
  }
  writer_ = std::make_unique<gyre::torch::Checkpointer>(gyre::torch::CheckpointOptions{dir_, o_.keepLast});
  lastSaved_ = start.step;
  return start;
}

StartPoint TrainCheckpoints::startConverted(const ResumeTarget& target, ::torch::optim::Optimizer& optimizer,
                                            const SavedLayout& saved, const std::string& config) {
  // Every rank loads; then worker 0 moves the old layout aside; each step is agreed on, so that a
  // refusal anywhere stops every rank and no rank saves before the old layout is out of the way.
  std::int64_t code = kResumed;
  std::string message;
  auto agree = [&] { agreeOnStart(comm_.get(), code, message, o_.checkpointDir); };
  StartPoint loaded;
  attemptOnStart([&] { loaded = loadOnThisLayout(o_, saved, config, target, optimizer); }, code, message);
  agree();
  std::string movedTo = saved.dir;  // already aside
  if (rank_ == 0)
    attemptOnStart(
        [&] {
          if (saved.earlier) {
            // What DIR holds is a layout's unfinished start (no step every part saved): aside too.
            moveAside(o_.checkpointDir, "unfinished-after-step-" + std::to_string(loaded.step));
          } else {
            movedTo = moveAside(o_.checkpointDir, "step-" + std::to_string(loaded.step));
            // The checkpoint resumed from is there now.
            loaded.path = (std::filesystem::path(movedTo) /
                           std::filesystem::path(loaded.path).lexically_relative(o_.checkpointDir))
                              .string();
          }
        },
        code, message);
  agree();
  if (rank_ == 0) {
    const nlohmann::json s = nlohmann::json::parse(saved.config);
    std::printf("resumed a checkpoint of %d worker(s) with --pp %d --tp %d --zero %d on this layout; %s %s\n",
                s.value("world", 1), s.value("pp", 1), s.value("tp", 1), s.value("zero", 0),
                saved.earlier ? "it was set aside in" : "its checkpoints are now in", movedTo.c_str());
    std::fflush(stdout);
  }
  // As start() and startSplit(): a split model's every rank saves its part, an unsplit one rank 0.
  if (split_ || rank_ == 0)
    writer_ = std::make_unique<gyre::torch::Checkpointer>(gyre::torch::CheckpointOptions{dir_, o_.keepLast});
  lastSaved_ = loaded.step;
  return loaded;
}

namespace {

// The lines of `path` that `parse` reads as a record for which `keep` is true.
template <typename Parse, typename Keep>
std::string keptLines(const std::string& path, Parse parse, Keep keep) {
  std::ifstream in(path);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    try {
      const auto record = parse(line);
      if (record && keep(*record)) out += line + "\n";
    } catch (const Error&) {  // a damaged line: not kept
    }
  }
  return out;
}

}  // namespace

std::string epochLinesUpTo(const std::string& path, std::int64_t epoch) {
  return keptLines(path, parseEpochRecord, [&](const EpochRecord& e) { return e.epoch <= epoch; });
}

std::string stepLinesUpTo(const std::string& path, std::int64_t step) {
  return keptLines(path, parseStepRecord, [&](const StepRecord& s) { return s.step <= step; });
}

}  // namespace gyre::train
