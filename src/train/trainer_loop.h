// The built-in trainer's training loop (trainer.cc) and its records (trainer_records.cc): the
// run directory's files, checkpoints, the lines rank 0 prints. Internal to src/train/.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gyre/ps.h"
#include "gyre/torch.h"
#include "train/checkpointing.h"
#include "train/cpu_quota.h"
#include "train/layout.h"
#include "train/models.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/step_log.h"
#include "train/stragglers.h"
#include "train/trainer.h"

namespace gyre::train {
class LiveMetrics;
}

namespace gyre::train::detail {

// Test images evaluated per forward pass.
inline constexpr std::int64_t kEvalChunk = 1000;

// Runs `draw`, then puts the default generator back as it was: what `draw` draws leaves the run's
// random numbers (and so every layout's initial values) as they would be without it.
template <typename F>
void withGeneratorPutBack(F&& draw) {
  const std::string rng = gyre::torch::torchRngState();
  std::forward<F>(draw)();
  gyre::torch::setTorchRngState(rng);
}

// The collectives the loop needs; in plain mode (no communicator) a world of one.
class Group {
 public:
  Group() = default;
  explicit Group(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  const std::shared_ptr<Communicator>& comm() const { return comm_; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }
  void barrier() {
    if (comm_) comm_->barrier();
  }
  std::vector<double> mean(const std::vector<double>& values) {
    return comm_ ? gyre::torch::allreduceMetrics(*comm_, values) : values;
  }
  std::vector<double> sum(std::vector<double> values) { return reduce(std::move(values), ReduceOp::kSum); }
  std::vector<double> max(std::vector<double> values) { return reduce(std::move(values), ReduceOp::kMax); }

 private:
  std::vector<double> reduce(std::vector<double> values, ReduceOp op) {
    if (comm_) comm_->allreduce(values.data(), values.data(), values.size(), {DataType::kFloat64, op});
    return values;
  }

  std::shared_ptr<Communicator> comm_;
};

class Trainer {
 public:
  Trainer(const TrainOptions& options, std::shared_ptr<Communicator> comm);
  std::vector<EpochRecord> run();

 private:
  // Trains epoch `epoch` (from 1) from its step `first`; sets stopped_ when stopAtStep cuts it.
  EpochRecord trainEpoch(int epoch, std::int64_t first);
  EpochRecord reportOf(int epoch) const;
  // The rate of the step after `step` steps: warm-up, then constant or cosine.
  double learningRate(std::int64_t step) const;
  // With --resume, the newest checkpoint's model, optimizer and generator state, and start_ and
  // globalStep_ from it; the optimizer flags applied. Collective.
  void resume();
  // A checkpoint after `done` steps of epoch `epoch` (from 1); rank 0 prints a line for it.
  void saveCheckpoint(int epoch, std::int64_t done, std::vector<CheckpointSave>& saves);
  // What this rank's checkpoints hold: the model (with --zero 3 its shards) and the optimizer
  // whose state this rank keeps (with --zero 1 and 2 the one over its part of the buckets).
  ::torch::nn::Module& checkpointModel();
  ::torch::optim::Optimizer& checkpointOptimizer();
  // Rank 0 prints where a resumed run starts, and keeps the run directory's records up to it.
  void announceStart();
  // The steps since the last flush: their losses averaged over ranks, into steps.jsonl.
  void flushSteps();
  // Correct predictions and samples of the test set, summed over the ranks' shards.
  double testAccuracy();
  // Test images [first, last) of share `part` of `parts` equal shares.
  std::pair<std::int64_t, std::int64_t> testShare(int part, int parts) const;
  // The test accuracy from each rank's correct predictions and the samples it counted, summed.
  double accuracyOver(double correct, double counted);
  // Correct predictions of `model` (this rank's model_, or a snapshot's copy) among test images
  // [first, last).
  double correctPredictions(::torch::nn::Sequential& model, std::int64_t first, std::int64_t last);
  void zeroGrad() {
    if (ps_) return ps_->zeroGrad();
    if (fsdp_) return fsdp_->zeroGrad();
    if (dist_) return dist_->zeroGrad();
    optimizer_->zero_grad();
  }
  void step() {
    if (ps_) return ps_->step();
    if (fsdp_) fsdp_->synchronize();
    if (dist_) return dist_->step();
    optimizer_->step();
  }
  void setLearningRate(double lr) {
    gyre::torch::setLearningRate(*optimizer_, lr);
    if (ps_) ps_->setLearningRate(lr);
  }
  void resetTiming() {
    if (dist_) dist_->resetTiming();
    if (fsdp_) fsdp_->resetTiming();
    if (ps_) ps_->resetTiming();
    dataWaitS_ = 0;
    dataWaitLogged_ = 0;
    pipelineStepS_ = 0;
    pipelineStepBusyS_.clear();
    peakActivationBytes_ = 0;
  }
  // A batch of the step and the weight of its mean loss.
  struct StepPart {
    gyre::data::Batch batch;
    double weight = 1;
    std::int64_t part = 0;               // this rank's replica, or (elastic) the batch shard
    std::vector<std::int64_t> samples;   // the batch's sample indices: with GYRE_SAMPLE_LOG only
  };
  // GYRE_SAMPLE_LOG: the samples of each step's parts, one line each (docs/training.md).
  void logSamples(int epoch, const std::vector<StepPart>& parts);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> sampleLog_{nullptr, &std::fclose};
  std::unique_ptr<CpuQuota> cpuQuota_;  // --straggler-cpu, on the straggler's rank
  std::vector<std::vector<std::int64_t>> epochBatches_;  // the loader's list, kept for the log
  // Step s's batch (this rank's share): from the epoch's loader, or, elastic, assembled here from
  // the elastic sampler's indices, one part per shard of the batch (ElasticSampler::parts()).
  // Adds the time it took to dataWaitS_.
  std::vector<StepPart> nextBatch(std::optional<gyre::data::Loader>& loader);
  void reportSkips(int epoch);
  // The forward and backward passes of the step's parts (their gradients add up), the losses
  // weighed by `share` and each part's weight; returns the unweighted mean loss of the samples.
  double forwardBackward(const std::vector<StepPart>& parts, double share);
  // Restarted from the checkpoint at an epoch's end whose record is missing (rank 0 looks):
  // evaluates the checkpoint's model and publishes the epoch's record. Collective.
  std::optional<EpochRecord> recordCheckpointedEpoch();
  // The mean of epoch `epoch`'s step losses in rank 0's steps.jsonl text (which keeps the steps
  // before a restart, and, elastic, on every rank, those of earlier memberships); nullopt on other
  // ranks and without a run directory.
  std::optional<double> epochLoss(int epoch) const;
  // Rank 0: prints the epoch's line (and JSON), then recordEpoch().
  void publish(const EpochRecord& report);
  // metrics.jsonl gets the epoch (written by rank 0; kept by every rank in elastic mode).
  void recordEpoch(const EpochRecord& report);
  void saveModel();
  // TrainOptions::faultAtStep: at `point` (TrainOptions::faultPoint's names) of global step `step`,
  // this rank kills itself if it is the one. Collective, except at "after-step".
  void maybeInjectFault(std::string_view point, std::int64_t step);
  // TrainOptions::stragglerRank (trainer_fault.cc): the straggler sleeps (factor - 1) x the compute
  // time of its previous step; computeDone() records this step's (forward and backward).
  void straggle();
  void computeDone(double seconds) { lastComputeS_ = seconds; }
  // The forward and backward pass of one batch, the loss weighed by `weight`; returns the
  // unweighted loss.
  double forwardBackward(const gyre::data::Batch& batch, double weight);
  // The data-parallel optimizer's options from the flags (the timeline aside).
  gyre::torch::DistributedOptimizerOptions distributedOptions() const;
  // --autotune: once the tuning is done, keeps its choice for the epoch's record and rank 0 shows it.
  void noteAutotune();
  // TrainOptions::stragglerThreshold (trainer_fault.cc): after each data-parallel step, the ranks'
  // ready times go to the monitor; rank 0 shows who became or stopped being a straggler.
  void watchStragglers();
  // progress.jsonl's line for the step just done, with the time and, when the ranks share them,
  // their step times (trainer_fault.cc).
  void logStep();
  // A --compression powersgd:R that compresses none of the model's gradients is refused here,
  // before training (InvalidArgument).
  void checkCompressionFits() const;
  // TrainOptions::evalEvery (trainer_records.cc). maybeSnapshot(): after global step globalStep_,
  // when it is due, rank 0 copies the model's parameters and buffers with the step and the
  // training time so far (the copy's own time left out), so that training is not held up (every
  // rank in elastic mode, since any of them may become rank 0). writeEvaluations(): after
  // training, rank 0 evaluates the snapshots in step order and writes eval.jsonl.
  void maybeSnapshot();
  void writeEvaluations();

  // Pipeline parallelism (trainer_pipeline.cc): splits the world into the layout's pipeline and
  // data-parallel groups and cuts model_ into this rank's stages (before the optimizer is made
  // over their parameters); each step's bubble into the epoch's figures; the test accuracy through
  // the pipeline; every stage's trained parameters into model_ (to save it whole).
  void attachPipeline();
  // --pp, --tp: the mesh's communicators (pipeComm_, tensorComm_, dataParallelComm_). Collective.
  void splitMesh();
  // EpochRecord::peakRssBytes, modelStateBytes and parameterBytes (trainer_records.cc). Collective.
  void recordMemory(EpochRecord& report);
  std::int64_t heldParameterBytes() const;  // this worker's, for parameterBytes
  void notePipelineStep();
  // The epoch's stage times: each pipeline rank's compute per micro-batch, and the bubble they
  // alone would make (gyre::torch::stageTimesBubble), step by step.
  void stageTimesOfEpoch(PipelineRecord& r);
  void recordPipelineEpoch(EpochRecord& report);
  double pipelineTestAccuracy();
  // --zero 3 (trainer_sharded.cc): wraps model_ in a FullyShardedModel (before the optimizer is
  // made over its shards); the test accuracy through it, every rank running as many forward
  // passes (each gathers the parameters with every rank).
  void attachFullySharded();
  // --zero 3 alone (no --pp, --tp): what makeModel calls on each layer as it is made, to keep this
  // rank's shard of it (madeShards_) and give back the rest, so that no worker holds the whole
  // model (deferredShards_). Otherwise nothing.
  ChildMade planDeferredShards();
  // The whole model for model.pt: on every rank, or onto rank 0 alone when made in shards.
  void gatherShards();
  // Training is done: the optimizer's state and the gradients of `trained` go, and what the heap
  // holds free goes back to the system, to make room for the whole model (rank 0, model.pt).
  void dropTrainingState(const std::vector<::torch::Tensor>& trained);
  double shardedTestAccuracy();
  // --tp (trainer_tensor.cc): model_ becomes this rank's share of each block (wholeModel_ keeps
  // the unsplit twin); the trained shares gathered into wholeModel_ for model.pt (onto rank 0
  // alone when deferredWhole_). Collective.
  void attachTensorParallel();
  void gatherTensorParallel();
  // --tp: what makeModel calls on each layer as it is made, to take this rank's share of it into
  // tensorShares_ and give the layer back, so that no worker holds the whole model
  // (deferredWhole_: wholeModel_ holds no memory but for a resume that converts a checkpoint, and
  // rank 0's model.pt); beside --pp, the shares of other ranks' stages are given back too.
  // Otherwise nothing.
  ChildMade planTensorShares();
  void gatherPipelineStages();
  // --pp: balance_, the layers of each stage, before the model is made (--balance time: rank 0
  // times the layers of a model it draws layer by layer for the purpose, and broadcasts them).
  // Collective. Otherwise nothing.
  void planBalance();
  // --pp without --tp: what makeModel calls on each layer as it is made, to release those of
  // other ranks' stages, so that no worker holds the whole model (with --pp, model_ holds memory
  // for this rank's stages only). Otherwise nothing.
  ChildMade planDeferredStages();
  // The layers of other ranks' stages given back again (after a resume filled them).
  void releaseOthersStages();
  bool ownsLayer(std::size_t child) const;  // whether the layer is in one of this rank's stages

  // Parameter-server modes (trainer_ps.cc): ps_ in place of dist_; each epoch's staleness and
  // clock waits, summed over the workers; rank 0's closing line on the whole run's staleness.
  void attachParameterServer();
  void beginParameterServerEpoch();
  void recordParameterServerEpoch(EpochRecord& report);
  void announceStaleness();

  // Elastic training (trainer_elastic.cc): run() through gyre::elastic::run; attach() rebuilds
  // what depends on the world for each membership; the batch of step s and its loss weight.
  std::vector<EpochRecord> runElastic();
  void attach(std::shared_ptr<Communicator> comm);
  // The warm-up for the current lr_ (rebuilt when the world changes the scaled rate).
  void planWarmup();
  // After global step globalStep_, every commitEvery steps: commit the elastic state.
  void maybeCommit();

  TrainOptions o_;
  Group group_;
  int world_;
  Layout layout_;  // --pp: replicas of a pipeline; otherwise world_ replicas of one rank
  std::int64_t perRankBatch_;  // batch / replicas
  int torchThreads_;
  // Fashion-MNIST through gyre::data (cached: a second trainer in this process does not decode it
  // again), or --data's set (training_data.h): the training split read batch by batch.
  struct Data {
    std::shared_ptr<const gyre::data::Source> train;
    gyre::data::Dataset test;
    std::size_t skipsReported = 0;  // of train->skipped(): said at the end of an epoch
  } data_;
  ModelShape shape_;  // what the model takes: the data's images and classes
  DataFigures dataFigures_;  // the data's normalisation and class names, for config.json
  std::vector<gyre::data::Transform> transforms_;  // --augment
  // The seed of epoch `epoch`'s (from 1) augmentations: another draw every epoch.
  std::uint64_t augmentSeed(int epoch) const { return o_.seed * 1000003ULL + static_cast<std::uint64_t>(epoch); }
  VitOptions vitOptions() const {
    return {.depth = o_.vitDepth, .width = o_.vitWidth, .heads = o_.vitHeads, .patch = o_.vitPatch};
  }
  ::torch::nn::Sequential model_;
  ::torch::nn::Sequential wholeModel_{nullptr};  // --tp: the unsplit model, for model.pt (model_ holds a share)
  ::torch::nn::Sequential tensorShares_{nullptr};  // planTensorShares(): the share, made layer by layer
  bool deferredWhole_ = false;                     // planTensorShares()
  std::shared_ptr<Communicator> tensorComm_;  // --tp: this rank's tensor-parallel group
  double lr_;
  std::shared_ptr<::torch::optim::Optimizer> optimizer_;  // optimizer_choice.h
  std::unique_ptr<gyre::torch::DistributedOptimizer> dist_;
  std::unique_ptr<gyre::torch::FullyShardedModel> fsdp_;  // --zero 3, instead of dist_
  // --zero 3: this rank's shards as the parameters of a module ("unit<k>"), what its checkpoints hold.
  std::shared_ptr<::torch::nn::Module> shardsModule_;
  bool deferredShards_ = false;              // planDeferredShards()
  std::vector<::torch::Tensor> madeShards_;  // its shards, until attachFullySharded() takes them
  // --zero (without --pp): where this rank's flat shards lie in the whole model's parameters
  // (flat_state.h's text), saved in every checkpoint so that another layout can resume it.
  std::string shardLayout_;
  std::unique_ptr<gyre::torch::PSOptimizer> ps_;  // parameter-server modes, instead of dist_
  ps::WorkerStats psEpochStart_;                   // this worker's stats when the epoch began
  std::vector<std::uint64_t> stalenessTotal_;      // the run's updates by staleness, all workers
  // This rank's batches of each epoch (not elastic), assembled by a gyre::data::Loader per epoch
  // on o_.dataWorkers threads.
  std::optional<gyre::data::DistributedBatchSampler> batchSampler_;
  double dataWaitS_ = 0;  // seconds the loop waited for batches since resetTiming()
  std::int64_t stepsPerEpoch_ = 0;
  std::optional<gyre::torch::WarmupSchedule> warmup_;
  std::int64_t warmupSteps_ = 0;
  std::int64_t globalStep_ = 0;
  ProgressBar progress_;
  std::string metricsText_;  // metrics.jsonl so far
  std::string stepsText_;    // steps.jsonl so far
  struct StepRecord {
    std::int64_t step;  // global, from 1
    int epoch;
    double lr;
  };
  std::vector<StepRecord> steps_;   // since the last flushSteps
  std::vector<double> stepLosses_;  // this rank's loss of each of steps_
  TrainCheckpoints checkpoints_;
  std::string config_;  // config.json, also saved in every checkpoint
  StepLog stepLog_;     // progress.jsonl (rank 0, with a run directory)
  std::unique_ptr<LiveMetrics> live_;  // --metrics-port (rank 0)
  double dataWaitLogged_ = 0;          // dataWaitS_ at the last logStep()
  StartPoint start_;
  bool stopped_ = false;
  double lastComputeS_ = 0;  // the straggler's previous step
  std::optional<BackupWorkers> backups_;             // TrainOptions::backupWorkers
  std::optional<AutotuneRecord> autotune_;           // --autotune, once done
  std::optional<StragglerMonitor> stragglers_;       // with a data-parallel world and a threshold
  std::shared_ptr<gyre::torch::Timeline> timeline_;  // GYRE_TIMELINE's, or null
  // Time-to-accuracy (evalEvery): when the first step began, the time since spent on anything but
  // training (the epochs' evaluations, the snapshots), the snapshots not evaluated yet.
  std::chrono::steady_clock::time_point trainStart_{};
  double evalS_ = 0;
  struct EvalSnapshot {
    std::int64_t step;                   // global
    double timeS;                        // training time up to it
    std::vector<::torch::Tensor> state;  // model_'s parameters, then its buffers
  };
  std::vector<EvalSnapshot> evalSnapshots_;
  // --pp > 1 only: this rank's stages, the groups, how the layers were cut, the epoch's sum of the
  // steps' seconds and each step's compute seconds (their bubble), the most activation bytes held.
  std::unique_ptr<gyre::torch::Pipeline> pipeline_;
  std::shared_ptr<Communicator> pipeComm_, dataParallelComm_;
  std::vector<int> balance_;
  std::shared_ptr<::torch::nn::Module> ownLayers_;  // this rank's stages' layers by name (checkpoint parts)
  double pipelineStepS_ = 0;
  std::vector<double> pipelineStepBusyS_;  // each timed step's compute seconds
  std::int64_t peakActivationBytes_ = 0;
  // Elastic mode only.
  std::optional<gyre::torch::ElasticSampler> elasticSampler_;
  gyre::torch::TorchState* elasticState_ = nullptr;
};

}  // namespace gyre::train::detail
