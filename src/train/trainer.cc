#include "train/trainer.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/files.h"
#include "gyre/init.h"
#include "gyre/torch.h"
#include "torch/gradient_compression.h"
#include "train/live_metrics.h"
#include "train/models.h"
#include "train/optimizer_choice.h"
#include "train/report.h"
#include "train/run_files.h"
#include "train/trainer_loop.h"
#include "train/training_data.h"

namespace gyre::train {
namespace {

using Clock = std::chrono::steady_clock;

// OPENBLAS_NUM_THREADS when it holds a thread count (OpenBLAS's own variable, not a knob);
// nullopt otherwise: OpenBLAS then uses its own default.
std::optional<int> blasThreadsFromEnvironment() {
  const char* text = std::getenv("OPENBLAS_NUM_THREADS");
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 4096) return std::nullopt;
  return static_cast<int>(value);
}

// --threads, else GYRE_NUM_THREADS (gyre run sets it for every worker), else libtorch's own
// default (GYRE_NUM_THREADS=0, as the knob documents). Sets it and returns it.
int setTorchThreads(const TrainOptions& o) {
  const int threads =
      o.threads > 0 ? o.threads
                    : static_cast<int>(config::getInt(config::processEnvironment(), "GYRE_NUM_THREADS"));
  if (threads > 0) ::torch::set_num_threads(threads);
  return ::torch::get_num_threads();
}

}  // namespace

namespace detail {

// Within its scope, this thread's forward ops run under libtorch's CPU autocast in bfloat16 (when
// `on`); the previous state comes back after it.
class CpuAutocast {
 public:
  explicit CpuAutocast(bool on) : on_(on) {
    if (!on_) return;
    wasEnabled_ = ::at::autocast::is_cpu_enabled();
    wasType_ = ::at::autocast::get_autocast_cpu_dtype();
    ::at::autocast::set_autocast_cpu_dtype(::at::kBFloat16);
    ::at::autocast::set_cpu_enabled(true);
  }
  ~CpuAutocast() {
    if (!on_) return;
    ::at::autocast::set_cpu_enabled(wasEnabled_);
    ::at::autocast::set_autocast_cpu_dtype(wasType_);
    ::at::autocast::clear_cache();
  }
  CpuAutocast(const CpuAutocast&) = delete;
  CpuAutocast& operator=(const CpuAutocast&) = delete;

 private:
  bool on_;
  bool wasEnabled_ = false;
  ::at::ScalarType wasType_ = ::at::kBFloat16;
};

Trainer::Trainer(const TrainOptions& options, std::shared_ptr<Communicator> comm)
    : o_(options),
      group_(std::move(comm)),
      world_(group_.size()),
      layout_(o_.elastic ? Layout{.dp = world_, .rank = group_.rank()} : layoutOf(o_, world_, group_.rank())),
      perRankBatch_(o_.batch / layout_.dp),
      torchThreads_(setTorchThreads(o_)),
      progress_(group_.rank() == 0 && progressEnabled(o_.progress)),
      checkpoints_(o_, group_.comm()) {
  // Elastic worlds come and go (attach()); the batch need not divide them, and the fault names a
  // worker id.
  if (!o_.elastic) checkWorld(o_, world_);
  {
    TrainingData d = loadTrainingData(o_);
    data_.train = d.train;
    data_.test = d.test;
    shape_ = d.shape;
    dataFigures_ = {d.mean, d.std, d.classes};
    transforms_ = augmentations(o_, d);
    if (group_.rank() == 0 && !d.skipped.empty()) {
      std::printf("gyre train: left out %zu bad sample(s) of %s (--skip-bad-records %lld):\n", d.skipped.size(),
                  o_.data.c_str(), static_cast<long long>(o_.skipBadRecords));
      for (const std::string& s : d.skipped) std::printf("  %s\n", s.c_str());
      std::fflush(stdout);
    }
  }

  if (o_.stragglerCpu > 0 && group_.rank() == o_.stragglerRank) {
    cpuQuota_ = CpuQuota::confine(o_.stragglerCpu);
    std::printf("gyre train: rank %d (the straggler) runs on %g core(s): a CPU quota in cgroup %s\n", group_.rank(),
                o_.stragglerCpu, cpuQuota_->path().c_str());
    std::fflush(stdout);
  }
  if (const std::string log = config::getString(config::processEnvironment(), "GYRE_SAMPLE_LOG"); !log.empty()) {
    const std::string file = log + "." + std::to_string(::getpid()) + ".jsonl";
    sampleLog_.reset(std::fopen(file.c_str(), "a"));
    GYRE_ENFORCE(sampleLog_ != nullptr, "GYRE_SAMPLE_LOG: cannot open ", file, ": ", std::strerror(errno));
  }

  // Every rank draws the same initial weights; the broadcast makes sure of it. A pipeline's ranks
  // (and --zero 3's, and --tp's) draw every layer too but keep only their stages (or shards, or
  // shares): no whole to broadcast.
  planBalance();  // --pp: how many layers each stage takes (--balance time draws the model to time it)
  ::torch::manual_seed(o_.seed);
  if (layout_.pp > 1 || layout_.tp > 1) splitMesh();  // --tp's shares are made with the model
  const ChildMade made = layout_.tp > 1   ? planTensorShares()
                         : layout_.pp > 1 ? planDeferredStages()
                                          : planDeferredShards();
  model_ = makeModel(o_.model, o_.syncBn, vitOptions(), shape_, made);
  if (group_.comm() && !made) gyre::torch::broadcastParameters(*model_, *group_.comm());
  gyre::torch::setSyncBatchNormCommunicator(*model_, group_.comm());

  checkCompressionFits();
  lr_ = gyre::torch::scaleLearningRate(o_.lr, world_, gyre::torch::parseLrScaling(o_.lrScaling));
  if (layout_.tp > 1) attachTensorParallel();  // before the pipeline cuts the split model
  if (layout_.pp > 1) attachPipeline();
  if (zeroStage(o_) == 3 && group_.comm()) attachFullySharded();
  optimizer_ = makeOptimizer(o_,
                             pipeline_ ? pipeline_->parameters()
                             : fsdp_   ? fsdp_->parameters()
                                       : model_->parameters(),
                             lr_);
  config_ = configJson(o_, world_, lr_, torchThreads_, balance_, shape_, dataFigures_);
  if (isParameterServerMode(o_.mode)) {
    attachParameterServer();
  } else if (group_.comm() && !fsdp_ && ((layout_.pp == 1 && layout_.tp == 1) || layout_.dp > 1)) {
    // The replicas average their gradients: of the whole model, or of this rank's stages or share.
    gyre::torch::DistributedOptimizerOptions d = distributedOptions();
    if (!timeline_) timeline_ = gyre::torch::Timeline::fromEnvironment(group_.comm());
    d.timeline = timeline_;
    dist_ = std::make_unique<gyre::torch::DistributedOptimizer>(
        layout_.pp > 1 || layout_.tp > 1 ? dataParallelComm_ : group_.comm(), optimizer_, d);
    if (o_.stragglerThreshold > 0 && !pipeline_) stragglers_.emplace(o_.stragglerThreshold);
    if (o_.backupWorkers > 0) backups_.emplace(o_.backupWorkers, o_.stragglerThreshold, group_.size());
  }
  // Resuming replaces the model's and the optimizer's state (and the generator's) on every rank,
  // once the optimizers exist: with --zero 1 and 2 the state is that of the one over this rank's
  // part of the buckets, which the DistributedOptimizer makes (the model loads in place, into them).
  resume();

  GYRE_USAGE_CHECK(o_.batch <= data_.train->size(), "--batch ", o_.batch, " is larger than the ",
                   data_.train->size(), " training samples");
  if (o_.elastic) {
    elasticSampler_.emplace(data_.train->size(), o_.batch, o_.seed);
    // Synchronised batch norm takes its statistics over the whole world's samples: one pass each.
    if (!o_.syncBn) elasticSampler_->setShards(o_.batchShards);
    stepsPerEpoch_ = elasticSampler_->stepsPerEpoch();
  } else {
    // Padded shards, full batches only: a partial last batch is dropped.
    gyre::data::BatchSamplerOptions s;
    s.seed = o_.seed;
    s.dropLastBatch = true;
    batchSampler_.emplace(data_.train->size(), layout_.dp, layout_.replica(), perRankBatch_, s);
    stepsPerEpoch_ = batchSampler_->size();
  }
  GYRE_USAGE_CHECK(stepsPerEpoch_ > 0, "--batch ", o_.batch, " leaves no step for a worker of the ", world_);
  if (o_.maxSteps > 0) stepsPerEpoch_ = std::min(stepsPerEpoch_, o_.maxSteps);
  GYRE_USAGE_CHECK(o_.skipSteps < stepsPerEpoch_, "--skip-steps ", o_.skipSteps,
                   " leaves none of the epoch's ", stepsPerEpoch_, " steps to time");

  planWarmup();
  // A checkpoint at an epoch's end, or one that a world with fewer steps per epoch cannot
  // continue within its epoch, starts the next epoch.
  if (start_.index / o_.batch >= stepsPerEpoch_) {
    ++start_.epoch;
    start_.index = 0;
  }
}

void Trainer::checkCompressionFits() const {
  // DistributedOptimizer checks it too, but only where it is built: an elastic job builds one
  // only once a membership has two workers, and would fail then on every worker.
  const gyre::torch::DistributedOptimizerOptions d = distributedOptions();
  if (d.compression != gyre::torch::Compression::kPowerSgd) return;
  std::vector<std::vector<std::int64_t>> shapes;
  for (const ::torch::Tensor& p : model_->parameters())
    if (p.requires_grad()) shapes.push_back(p.sizes().vec());
  gyre::torch::detail::makePowerSgd(d.powerSgdRank, shapes);
}

void Trainer::planWarmup() {
  warmupSteps_ =
      static_cast<std::int64_t>(std::llround(o_.warmupEpochs * static_cast<double>(stepsPerEpoch_)));
  warmup_.reset();
  if (warmupSteps_ > 0) {
    // Goyal et al.: from the single-worker rate to the scaled one; without scaling, from a tenth.
    const double start = lr_ != o_.lr ? o_.lr : lr_ / 10;
    warmup_.emplace(start, lr_, warmupSteps_);
  }
}

double Trainer::learningRate(std::int64_t step) const {
  if (warmup_ && step <= warmupSteps_) return warmup_->at(step);
  if (o_.lrSchedule != "cosine") return lr_;
  const double total = static_cast<double>(stepsPerEpoch_ * o_.epochs - warmupSteps_);
  const double t = static_cast<double>(step - warmupSteps_) / std::max(total, 1.0);
  return lr_ * 0.5 * (1 + std::cos(3.141592653589793 * t));
}

std::vector<EpochRecord> Trainer::run() {
  if (o_.elastic) return runElastic();
  if (group_.rank() == 0 && !o_.runDir.empty()) {
    createRunDirectory(o_.runDir);
    files::writeAtomically((std::filesystem::path(o_.runDir) / "config.json").string(), config_);
  }
  if (group_.rank() == 0) announceStart();
  if (group_.rank() == 0 && o_.metricsPort > 0)
    live_ = std::make_unique<LiveMetrics>(o_.metricsPort, group_.size(), o_.restartCount, o_.batch);
  if (group_.rank() == 0 && !o_.runDir.empty()) {
    // A resumed run (a restart, or --resume) continues the story of its attempts.
    stepLog_ = StepLog((std::filesystem::path(o_.runDir) / "progress.jsonl").string(), o_.resume);
    stepLog_.start(o_.restartCount, globalStep_);
  }
  stopped_ = o_.stopAtStep > 0 && globalStep_ >= o_.stopAtStep;
  std::vector<EpochRecord> reports;
  if (std::optional<EpochRecord> report = recordCheckpointedEpoch()) reports.push_back(std::move(*report));
  for (int epoch = static_cast<int>(start_.epoch) + 1; epoch <= o_.epochs && !stopped_; ++epoch) {
    EpochRecord report = trainEpoch(epoch, epoch == start_.epoch + 1 ? start_.index / o_.batch : 0);
    if (stopped_) break;  // cut short: no epoch figures
    reports.push_back(std::move(report));
    if (group_.rank() == 0) publish(reports.back());
    maybeInjectFault("after-record", globalStep_);
  }
  if (ps_ && group_.rank() == 0) announceStaleness();
  checkpoints_.finish();  // the last write is on disk, or its error is thrown
  writeEvaluations();     // rank 0, after training: the others may have left already
  if (stopped_) {
    if (group_.rank() == 0)
      std::printf("stopped after step %lld (--stop-at-step)%s\n", static_cast<long long>(globalStep_),
                  checkpoints_.enabled() ? "; continue with --resume" : "");
    std::fflush(stdout);
    return reports;
  }
  if (pipeline_ && !o_.runDir.empty()) gatherPipelineStages();
  if (fsdp_ && !o_.runDir.empty()) gatherShards();  // model.pt holds the whole model
  if (tensorComm_ && !o_.runDir.empty()) gatherTensorParallel();
  if (group_.rank() == 0 && !o_.runDir.empty()) saveModel();
  if (timeline_) timeline_->write();
  return reports;
}

// What an epoch's record says of the run itself; the caller adds what the epoch measured.
EpochRecord Trainer::reportOf(int epoch) const {
  EpochRecord r;
  r.epoch = epoch;
  r.epochs = o_.epochs;
  r.world = world_;
  r.plain = !dist_ && !ps_ && !pipeline_ && !fsdp_;
  r.mode = o_.mode;
  r.model = o_.model;
  r.batch = o_.batch;
  r.perRankBatch = perRankBatch_;
  r.lr = lr_;
  r.compression = o_.compression;
  return r;
}

gyre::torch::DistributedOptimizerOptions Trainer::distributedOptions() const {
  gyre::torch::DistributedOptimizerOptions d;
  d.bucketCapBytes = static_cast<std::size_t>(o_.bucketCapMb * (1 << 20));
  gyre::torch::setCompression(d, o_.compression);
  d.shardOptimizerState = zeroStage(o_) == 1 || zeroStage(o_) == 2;
  d.shardGradients = zeroStage(o_) == 2;
  d.shareStepTimes = o_.stragglerThreshold > 0;
  d.autotune = o_.autotune;
  d.algorithm = gyre::parseAllreduceAlgorithm(o_.allreduce);
  // Each micro-batch's backward adds to the gradients; the replicas average the sum of all m.
  if (layout_.pp > 1) d.backwardPassesPerStep = microBatchesOf(o_);
  return d;
}

void Trainer::noteAutotune() {
  if (!dist_ || !o_.autotune || autotune_) return;
  const std::optional<gyre::torch::AutotuneResult> a = dist_->autotuned();
  if (!a) return;
  autotune_ = AutotuneRecord{static_cast<double>(a->bucketCapBytes) / (1 << 20),
                             std::string(gyre::toString(a->algorithm)),
                             a->stepSeconds * 1e3,
                             a->trials,
                             a->steps,
                             a->summary};
  if (group_.rank() == 0) progress_.note("autotune: " + a->summary);
}

double Trainer::forwardBackward(const gyre::data::Batch& batch, double weight) {
  if (pipeline_) {
    GYRE_ENFORCE(weight == 1.0, "a pipeline step weighs every sample alike");
    const double loss = pipeline_->step(batch.images, batch.labels, [](const ::torch::Tensor& out, const ::torch::Tensor& target) {
      return ::torch::nn::functional::cross_entropy(out, target);
    });
    notePipelineStep();
    return loss;
  }
  ::torch::Tensor logits;
  {
    const CpuAutocast autocast(o_.precision == "bf16");
    logits = fsdp_ ? fsdp_->forward(batch.images) : model_->forward(batch.images);
  }
  const auto loss = ::torch::nn::functional::cross_entropy(logits.to(::torch::kFloat32), batch.labels);
  if (weight != 1.0) {
    (loss * weight).backward();
  } else {
    loss.backward();
  }
  return loss.item<double>();
}

double Trainer::forwardBackward(const std::vector<StepPart>& parts, double share) {
  if (parts.size() == 1) return forwardBackward(parts[0].batch, share * parts[0].weight);
  double sum = 0;
  std::int64_t samples = 0;
  for (const StepPart& part : parts) {
    const std::int64_t n = part.batch.labels.size(0);
    sum += forwardBackward(part.batch, share * part.weight) * static_cast<double>(n);
    samples += n;
  }
  return sum / static_cast<double>(std::max<std::int64_t>(samples, 1));
}

EpochRecord Trainer::trainEpoch(int epoch, std::int64_t first) {
  // This rank's batches of the epoch from step `first` on, assembled ahead on o_.dataWorkers
  // threads (started here, so the first batches are ready when the loop begins).
  std::optional<gyre::data::Loader> loader;
  if (batchSampler_) {
    batchSampler_->setEpoch(epoch - 1);
    std::vector<std::vector<std::int64_t>> batches = batchSampler_->batches();
    batches.resize(static_cast<std::size_t>(stepsPerEpoch_));  // --max-steps
    batches.erase(batches.begin(), batches.begin() + static_cast<std::ptrdiff_t>(first));
    gyre::data::LoaderOptions l;
    l.workers = o_.dataWorkers;
    l.transforms = transforms_;
    l.seed = augmentSeed(epoch);
    if (sampleLog_) epochBatches_ = batches;
    loader.emplace(data_.train, std::move(batches), std::move(l));
  }
  // The warm-up steps left out of the throughput: epoch 1's first, unless it is resumed midway.
  const std::int64_t skip = epoch == 1 && first == 0 ? o_.skipSteps : 0;
  std::vector<CheckpointSave> saves;

  model_->train();
  progress_.start(epoch, o_.epochs, stepsPerEpoch_, o_.batch);
  group_.barrier();
  resetTiming();
  beginParameterServerEpoch();
  auto begin = Clock::now();
  if (trainStart_ == Clock::time_point{}) trainStart_ = begin;
  double lossSum = 0;  // this rank's steps that computed
  std::int64_t lossSteps = 0;
  std::int64_t s = first;
  for (; s < stepsPerEpoch_ && !stopped_; ++s) {
    maybeInjectFault("before-step", globalStep_ + 1);
    if (s == skip && skip > 0) {  // the warm-up steps are done: time from here
      group_.barrier();
      resetTiming();
      begin = Clock::now();
    }
    const double lr = learningRate(globalStep_);
    setLearningRate(lr);
    const std::vector<StepPart> batch = nextBatch(loader);
    if (sampleLog_) logSamples(epoch, batch);
    // Backup workers: a rank that skips adds zeros; the others weigh their loss so that the
    // gradient is their average, and so is the step's loss in steps.jsonl (the mean over ranks).
    const bool skips = backups_ && backups_->skips(group_.rank());
    const double share = backups_ ? static_cast<double>(group_.size()) /
                                        static_cast<double>(group_.size() - backups_->skipping())
                                  : 1.0;
    double value = 0;
    zeroGrad();
    if (!skips) {
      straggle();
      const auto computeBegin = Clock::now();
      value = forwardBackward(batch, share);
      computeDone(seconds(Clock::now() - computeBegin));
      lossSum += value;
      ++lossSteps;
    }
    step();
    noteAutotune();
    watchStragglers();
    ++globalStep_;
    maybeSnapshot();
    steps_.push_back({globalStep_, epoch, lr});
    stepLosses_.push_back(value * share);
    progress_.update(s + 1, lossSum / static_cast<double>(std::max<std::int64_t>(lossSteps, 1)));
    logStep();
    stopped_ = o_.stopAtStep > 0 && globalStep_ >= o_.stopAtStep;
    if (checkpoints_.due(globalStep_)) {
      // steps.jsonl first, so that it covers every step a checkpoint covers: a run that dies
      // before the epoch's end resumes from the checkpoint and keeps the lines up to it.
      flushSteps();
      saveCheckpoint(epoch, s + 1, saves);
      maybeInjectFault("after-checkpoint", globalStep_);
      maybeInjectFault("in-checkpoint", globalStep_);
    }
    if (elasticSampler_) {
      elasticSampler_->advance();
      maybeCommit();
    }
    maybeInjectFault("after-step", globalStep_);
  }
  group_.barrier();
  const double elapsed = seconds(Clock::now() - begin);
  progress_.finish();
  reportSkips(epoch);
  flushSteps();
  // The end of training (or of this run): a checkpoint unless the last step just had one.
  if ((stopped_ || epoch == o_.epochs) && checkpoints_.enabled() &&
      checkpoints_.lastSavedStep() != globalStep_) {
    saveCheckpoint(epoch, s, saves);
    maybeInjectFault("after-checkpoint", globalStep_);
    maybeInjectFault("in-checkpoint", globalStep_);
  }
  const std::int64_t ran = s - first;

  EpochRecord r = reportOf(epoch);
  r.steps = ran;
  r.timedSteps = ran - skip;
  r.checkpoints = std::move(saves);
  gyre::torch::StepTiming timing;
  if (dist_) {
    timing = dist_->totals();
  } else if (fsdp_) {
    timing = fsdp_->totals();
  } else if (ps_) {
    timing = ps_->totals();
  } else {
    timing.compute = elapsed;
  }
  // The batches' wait happened between two step()s: inside timing.compute (and inside plain's
  // elapsed), of which it is a part.
  const std::vector<double> mean = group_.mean(
      {lossSum / static_cast<double>(std::max<std::int64_t>(lossSteps, 1)), elapsed, timing.compute,
       timing.communicate, timing.wait, timing.hidden(), dataWaitS_,
       static_cast<double>(timing.bytes) / static_cast<double>(std::max<std::int64_t>(timing.steps, 1))});
  // Rank 0's records hold every step's loss, also those before a restart: the epoch's loss is
  // then the same whether a restart split the epoch or not.
  r.loss = epochLoss(epoch).value_or(mean[0]);
  r.seconds = mean[1];
  r.computeS = mean[2];
  r.communicateS = mean[3];
  r.waitS = mean[4];
  r.hiddenS = mean[5];
  r.dataWaitS = std::min(mean[6], r.computeS);
  r.bytesPerStep = mean[7];
  if (stragglers_) r.stragglers = stragglers_->takeSeen();
  if (backups_) r.droppedGradients = backups_->takeDropped();
  r.autotune = autotune_;
  // Samples whose gradients counted: a worker that skipped a step (backup workers) trained on none.
  const std::int64_t dropped = r.droppedGradients.value_or(0) * (o_.batch / group_.size());
  r.samplesPerS =
      r.seconds > 0
          ? static_cast<double>(std::max<std::int64_t>(r.timedSteps * o_.batch - dropped, 0)) / r.seconds
          : 0;
  recordParameterServerEpoch(r);
  recordPipelineEpoch(r);
  recordMemory(r);
  if (o_.eval) {
    const auto evalBegin = Clock::now();
    r.testAccuracy = testAccuracy();
    evalS_ += seconds(Clock::now() - evalBegin);
  }
  if (o_.referenceSamplesPerS > 0) {
    r.speedup = r.samplesPerS / o_.referenceSamplesPerS;
    r.efficiency = *r.speedup / world_;
  }
  r.torchThreads = torchThreads_;
  r.blasThreads = blasThreadsFromEnvironment();
  return r;
}

std::optional<EpochRecord> Trainer::recordCheckpointedEpoch() {
  // The checkpoint at an epoch's end is written before the epoch's evaluation and record: a
  // restart from it whose run directory lacks the record (the fault came in between) would train
  // on, or stop after the last epoch, without it. The checkpoint holds the epoch's final model, so
  // this run evaluates it and writes the record. Rank 0 knows the records; everyone evaluates.
  if (o_.elastic || start_.path.empty() || start_.index != 0 || start_.epoch < 1 || start_.epoch > o_.epochs ||
      o_.runDir.empty())
    return std::nullopt;
  std::int64_t missing = 0;
  if (group_.rank() == 0) {
    missing = 1;
    std::istringstream in(metricsText_);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("epoch", std::int64_t{0}) == start_.epoch) missing = 0;
    }
  }
  if (group_.comm()) group_.comm()->broadcast(&missing, 1, {DataType::kInt64, 0});
  if (missing == 0) return std::nullopt;
  const int epoch = static_cast<int>(start_.epoch);
  if (group_.rank() == 0) {
    std::printf("epoch %d has no record in %s/metrics.jsonl: evaluating the checkpoint's model for it\n", epoch,
                o_.runDir.c_str());
    std::fflush(stdout);
  }
  EpochRecord r = reportOf(epoch);
  // This run trained none of the epoch's steps: no time, no throughput (a reference looked up
  // among earlier runs skips a record without samples/s).
  r.loss = epochLoss(epoch).value_or(std::nan(""));
  if (o_.eval) r.testAccuracy = testAccuracy();
  r.torchThreads = torchThreads_;
  r.blasThreads = blasThreadsFromEnvironment();
  if (group_.rank() == 0) publish(r);
  return r;
}

double Trainer::correctPredictions(::torch::nn::Sequential& model, std::int64_t first, std::int64_t last) {
  const gyre::data::Dataset& test = data_.test;
  double correct = 0;
  ::torch::NoGradGuard noGrad;
  model->eval();
  for (std::int64_t b = first; b < last; b += kEvalChunk) {
    const std::int64_t e = std::min(b + kEvalChunk, last);
    const auto predicted = model->forward(test.images.slice(0, b, e)).argmax(1);
    correct += static_cast<double>(predicted.eq(test.labels.slice(0, b, e)).sum().item<std::int64_t>());
  }
  model->train();
  return correct;
}

double Trainer::testAccuracy() {
  if (pipeline_) return pipelineTestAccuracy();
  if (fsdp_) return shardedTestAccuracy();
  // Each rank its share; with --tp each replica its share, the ranks of its tensor-parallel group
  // in the same forward passes (they compute them together), the first counting.
  const auto [first, last] = tensorComm_ ? testShare(layout_.replica(), layout_.dp) : testShare(group_.rank(), world_);
  const double correct = correctPredictions(model_, first, last);
  const bool counts = layout_.tpRank() == 0;
  return accuracyOver(counts ? correct : 0, counts ? static_cast<double>(last - first) : 0);
}

std::pair<std::int64_t, std::int64_t> Trainer::testShare(int part, int parts) const {
  const std::int64_t n = data_.test.size();
  return {n * part / parts, n * (part + 1) / parts};
}

double Trainer::accuracyOver(double correct, double counted) {
  const std::vector<double> total = group_.sum({correct, counted});
  return total[1] > 0 ? total[0] / total[1] : 0;
}

}  // namespace detail

std::vector<EpochRecord> runTraining(const TrainOptions& options, std::shared_ptr<Communicator> comm) {
  validateOptions(options);
  const bool ownWorld = options.plain || options.elastic;  // none, or the elastic memberships'
  GYRE_USAGE_CHECK(ownWorld == (comm == nullptr), options.plain     ? "plain mode trains without a communicator"
                                                  : options.elastic ? "elastic mode builds its own communicators"
                                                                    : "runTraining needs a communicator");
  return detail::Trainer(options, std::move(comm)).run();
}

std::vector<EpochRecord> runTraining(const TrainOptions& options) {
  validateOptions(options);
  return runTraining(options, options.plain || options.elastic ? nullptr : gyre::init());
}

}  // namespace gyre::train
