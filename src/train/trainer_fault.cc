// Trainer's fault injection (TrainOptions::faultAtStep, `gyre train --fault-at-step S --fault-rank R
// --fault-point P`): the deterministic mode of scripts/fault-injection.py and of the restart
// tests. A real crash, not a simulated one: the process is killed by SIGKILL, with no handler, no
// flush and no exit code of its own, and the launcher sees what it sees when a machine or the OOM
// killer takes a worker.
// Also the straggler of the benchmarks (TrainOptions::stragglerRank): a rank slowed down by a factor.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include "gyre/torch/checkpoint.h"
#include "train/live_metrics.h"
#include "train/trainer_loop.h"

namespace gyre::train::detail {
namespace {

// How the fault message places the point: "after step 19", "after the checkpoint of step 24".
std::string_view faultWhen(std::string_view point) {
  if (point == "before-step") return "before";
  if (point == "after-checkpoint") return "after the checkpoint of";
  if (point == "in-checkpoint") return "while writing the checkpoint of";
  if (point == "after-record") return "after the epoch's record, which ends at";
  return "after";
}

}  // namespace

void Trainer::maybeInjectFault(std::string_view point, std::int64_t step) {
  // Generation 0 only: the restarted generations must get past the step.
  // Elastic: the worker id, which a replacement does not reuse.
  const int who = o_.elastic ? o_.workerId : group_.rank();
  if (o_.faultAtStep == 0 || step != o_.faultAtStep || o_.restartCount != 0 || point != o_.faultPoint) return;
  if (point == "after-checkpoint" || point == "in-checkpoint" || point == "after-record") {
    checkpoints_.finish();  // rank 0: the write in flight is on disk, whatever a kill would leave
    if (point == "in-checkpoint" && group_.rank() == 0)
      for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(o_.checkpointDir))
        if (c.step == step) std::filesystem::remove(std::filesystem::path(c.path) / "manifest.json");
  }
  // Every point but after-step: every rank gets here first (rank 0 has written what the point
  // promises), and afterwards the others wait for the fault rank, which never comes: the files
  // on disk are the same in every run, whichever rank dies.
  if (point != "after-step") group_.barrier();
  if (who != o_.faultRank) {
    if (point != "after-step") group_.barrier();  // throws PeerLostError once the fault rank is gone
    return;
  }
  // What a resume can count on at this instant: the newest checkpoint with its manifest. One whose
  // write is still in flight (the background writer) is lost with this process, as it would be.
  std::string committed = "none";
  if (checkpoints_.enabled())
    for (const gyre::torch::CheckpointInfo& c : gyre::torch::listCheckpoints(o_.checkpointDir))
      if (c.complete) committed = "step " + std::to_string(c.step);
  std::fflush(stdout);
  std::fprintf(stderr,
               "gyre train: injecting a fault: %s %d kills itself (SIGKILL) %s step %lld; newest complete "
               "checkpoint: %s\n",
               o_.elastic ? "worker" : "rank", who, std::string(faultWhen(point)).c_str(),
               static_cast<long long>(step), committed.c_str());
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void Trainer::straggle() {
  if (group_.rank() != o_.stragglerRank || o_.stragglerFactor <= 1 || lastComputeS_ <= 0) return;
  // Before the forward pass, after the pull: what a slower machine's longer computation looks
  // like to the others (its gradient comes later and from older parameters).
  std::this_thread::sleep_for(std::chrono::duration<double>((o_.stragglerFactor - 1) * lastComputeS_));
}

void Trainer::watchStragglers() {
  if (!dist_ || !stragglers_) return;
  std::vector<double> times = dist_->stepTimes();
  if (backups_) {
    const std::vector<double> measured = times;
    // A rank that skipped the step only waited: the monitor keeps seeing its recent time.
    for (int r = 0; r < group_.size(); ++r)
      if (backups_->skips(r)) times[static_cast<std::size_t>(r)] = backups_->recent(r);
    backups_->observe(measured);
  }
  const std::vector<std::string> lines = stragglers_->observe(globalStep_, times);
  if (lines.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  for (const std::string& line : lines) {
    if (timeline_) timeline_->span(gyre::torch::Timeline::Track::kCompute, line, now, now);
    if (group_.rank() != 0) continue;
    progress_.note(line);
  }
}

void Trainer::logStep() {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<double> rankMs;
  if (dist_ && stragglers_) {
    rankMs = dist_->stepTimes();
    for (double& t : rankMs) t *= 1e3;
  }
  stepLog_.step(elasticState_ ? static_cast<int>(elasticState_->membership()) : o_.restartCount, globalStep_,
                now, rankMs);
  if (!live_) return;
  gyre::torch::StepTiming timing;
  if (dist_) {
    timing = dist_->lastStep();
  } else if (ps_) {
    timing = ps_->lastStep();
  }
  // Both restart at each epoch's resetTiming().
  const double dataWait = dataWaitS_ - dataWaitLogged_;
  dataWaitLogged_ = dataWaitS_;
  live_->step(timing, dataWait, rankMs);
}

}  // namespace gyre::train::detail
