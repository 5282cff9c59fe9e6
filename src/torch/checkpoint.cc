// Checkpointer: the snapshot on the caller's thread, the write on a writer thread, keepLast.
// Loading is in checkpoint_load.cc, the files' format in checkpoint_files.cc.
#include "gyre/torch/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "common/files.h"
#include "common/check.h"
#include "gyre/errors.h"
#include "torch/checkpoint_files.h"
#include "torch/optimizer_bytes.h"

namespace gyre::torch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string stateJson(const CheckpointState& s) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  j["epoch"] = s.epoch;
  j["sampler"] = {{"epoch", s.sampler.epoch}, {"index", s.sampler.index}};
  j["schedule"] = {{"step", s.scheduleStep}, {"lr", s.lr}};
  j["values"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : s.values) j["values"][key] = value;
  j["config"] = s.config;
  try {
    return j.dump(2) + "\n";
  } catch (const nlohmann::json::type_error& e) {
    throw InvalidArgument(std::string("Checkpointer::save: the values and the config must be UTF-8 text (") +
                          e.what() + ")");
  }
}

// One checkpoint, serialized: what the writer thread writes.
struct Snapshot {
  std::int64_t step = 0;
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
};

}  // namespace

std::int64_t SamplerPosition::localOffset(int ranks) const {
  GYRE_USAGE_CHECK(ranks >= 1, "SamplerPosition: ranks must be at least 1, not ", ranks);
  GYRE_USAGE_CHECK(index % ranks == 0, "the sampler position ", index, " of epoch ", epoch,
                   " does not divide among ", ranks, " ranks");
  return index / ranks;
}

std::vector<CheckpointInfo> listCheckpoints(const std::string& dir) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::optional<std::int64_t> step = detail::parseCheckpointName(entry.path().filename().string());
    std::error_code typeError;
    if (!step || !entry.is_directory(typeError)) continue;
    out.push_back(
        {*step, entry.path().string(), fs::exists(entry.path() / detail::kManifestName, typeError)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

class Checkpointer::Impl {
 public:
  explicit Impl(CheckpointOptions options) : options_(std::move(options)) {
    GYRE_USAGE_CHECK(!options_.dir.empty(), "Checkpointer: the checkpoint directory must not be empty");
    GYRE_USAGE_CHECK(options_.keepLast >= 1, "Checkpointer: keepLast must be at least 1, not ",
                     options_.keepLast);
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    if (ec) throw SystemError("cannot create the checkpoint directory " + options_.dir + ": " + ec.message());
  }

  ~Impl() {
    if (writer_.joinable()) writer_.join();
    if (!error_.empty()) std::fprintf(stderr, "gyre: error: %s\n", error_.c_str());
  }

  SaveStats save(const ::torch::nn::Module& model, const ::torch::optim::Optimizer& optimizer,
                 const CheckpointState& state) {
    const auto begin = Clock::now();
    wait();
    const auto snapshotBegin = Clock::now();
    Snapshot snapshot;
    snapshot.step = state.step;
    {
      ::torch::NoGradGuard noGrad;
      ::torch::serialize::OutputArchive archive;
      model.save(archive);
      snapshot.files.emplace_back("model.pt", archiveBytes(archive));
    }
    snapshot.files.emplace_back("optimizer.pt", optimizerStateBytes(optimizer));
    snapshot.files.emplace_back("torch_rng.bin", torchRngState());
    snapshot.files.emplace_back("state.json", stateJson(state));
    SaveStats stats;
    stats.step = state.step;
    stats.path = options_.dir + "/" + detail::checkpointName(state.step);
    for (const auto& file : snapshot.files) stats.bytes += file.second.size();
    writer_ = std::thread([this, s = std::move(snapshot)] { write(s); });
    const auto end = Clock::now();
    stats.waitS = std::chrono::duration<double>(snapshotBegin - begin).count();
    stats.stallS = std::chrono::duration<double>(end - begin).count();
    return stats;
  }

  // error_ is written by the writer thread only while it runs and read here only after the
  // join, which orders the two.
  void wait() {
    if (writer_.joinable()) writer_.join();
    if (error_.empty()) return;
    const std::string error = std::move(error_);
    error_.clear();
    throw SystemError(error);
  }

  const CheckpointOptions& options() const { return options_; }

 private:
  void write(const Snapshot& s) {
    const std::string dir = options_.dir + "/" + detail::checkpointName(s.step);
    bool created = false;
    try {
      std::error_code ec;
      if (fs::exists(dir, ec) && !detail::removeCheckpointDirectory(dir))
        throw SystemError("cannot replace the old checkpoint " + dir);
      if (::mkdir(dir.c_str(), 0755) != 0)
        throw SystemError("cannot create the checkpoint directory " + dir + ": " + std::strerror(errno) +
                          (errno == ENOSPC ? " (the disk is full)" : ""));
      created = true;
      std::vector<detail::ManifestEntry> entries;
      for (const auto& [name, bytes] : s.files) {
        files::writeAtomically(dir + "/" + name, bytes);
        entries.push_back({name, bytes.size(), detail::crc32c(bytes.data(), bytes.size())});
      }
      files::syncDirectory(dir);
      // Last: its presence makes the checkpoint complete.
      files::writeAtomically(dir + "/" + detail::kManifestName, detail::manifestJson(s.step, entries));
      files::syncDirectory(dir);
      files::syncDirectory(options_.dir);
    } catch (const std::exception& e) {
      error_ = std::string(e.what()) + "; checkpoint of step " + std::to_string(s.step) +
               " not written, earlier checkpoints kept";
      if (created) detail::removeCheckpointDirectory(dir);
      return;
    }
    removeOld(s.step);
  }

  // Keeps the keepLast newest complete checkpoints up to `newest`, and deletes the incomplete ones
  // before it (leftovers of interrupted writes). Later steps are left alone: they can only be
  // another run's, or invalid ones that the run resumed before.
  void removeOld(std::int64_t newest) {
    std::vector<CheckpointInfo> all = listCheckpoints(options_.dir);
    int kept = 0;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (it->step > newest) continue;
      if (it->complete && kept < options_.keepLast) {
        ++kept;
        continue;
      }
      if (!detail::removeCheckpointDirectory(it->path))
        std::fprintf(stderr, "gyre: warning: cannot delete the old checkpoint %s\n", it->path.c_str());
    }
  }

  CheckpointOptions options_;
  std::thread writer_;
  std::string error_;  // the last write's failure, until save() or wait() throws it
};

Checkpointer::Checkpointer(CheckpointOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Checkpointer::~Checkpointer() = default;

SaveStats Checkpointer::save(const ::torch::nn::Module& model, const ::torch::optim::Optimizer& optimizer,
                             const CheckpointState& state) {
  return impl_->save(model, optimizer, state);
}

void Checkpointer::wait() {
  impl_->wait();
}

const CheckpointOptions& Checkpointer::options() const {
  return impl_->options();
}

}  // namespace gyre::torch
