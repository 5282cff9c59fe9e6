// Pipeline parallelism: a model cut by layers into stages, each stage on one rank of a pipeline
// group, trained on micro-batches so that the stages work at once.
//
// A model is a sequence of layers (a torch::nn::Sequential). Its S = p·v stages are contiguous
// runs of layers (balanceEvenly, balanceByCost); rank r of a pipeline group of p ranks holds the
// v stages r, r + p, r + 2p, ... (v > 1: interleaved, "virtual stages"). A step splits the batch
// into m micro-batches along dimension 0; each stage runs its forward (F) and backward (B) on each
// micro-batch in the order of a schedule (pipelineActions):
//
//   GPipe        every F, then every B                     activations held: m micro-batches
//   1F1B         (PipeDream-flush) p − 1 − r warm-up Fs, then one F and one B in turn, then the
//                remaining Bs                               held: at most p − r
//   interleaved  1F1B over v stages per rank (Megatron-LM's order; m a multiple of p): the bubble
//                shrinks from (p−1)/(m+p−1) to (p−1)/(v·m+p−1); its exchanges are batched, two
//                sends and two receives at once (Communicator::exchange)
//   zero-bubble  1F1B whose backward is split into the input gradient (B), which the stage before
//                waits for, and the weight gradient (W), which nobody waits for: rank r defers its
//                Ws by p − 1 − r micro-batches and runs them where 1F1B waits (ZB-H1, Qi et al. 2023)
//
// Activations go forward and their gradients backward as the communicator's point-to-point
// messages; a send and the next receive go together (Communicator::sendRecv, or ::exchange for
// several), so no two stages wait on each other's sends. A stage's output is [b, ...] for a
// micro-batch of b samples, the rest of its shape and its dtype fixed: the first step learns
// them from a one-sample forward of each stage in turn, and they never travel again.
//
// Gradients accumulate in the stages' parameters and equal the unsplit model's on the whole batch
// (each micro-batch's loss is weighted by its share of the batch, as a mean over the batch is):
// an optimizer over this rank's parameters then steps as the unsplit model's would.
//
//   auto pp = world->split(world->rank() / P, world->rank());  // or any group of p ranks
//   std::vector<int> balance = gyre::torch::balanceEvenly(layers->size(), P);
//   gyre::torch::Pipeline pipe(gyre::torch::stagesOf(layers, balance, pp->rank(), P), pp, options);
//   double loss = pipe.step(images, labels, lossFn);  // every rank passes the same batch
//
// Thread-safety: one thread drives a Pipeline. Every rank of the group must call step() (and
// forward()) as often, with batches of the same size.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/torch/timeline.h"

namespace gyre::torch {

enum class PipelineSchedule { kGPipe, kOneFOneB, kInterleaved, kZeroBubble };

std::string_view toString(PipelineSchedule schedule);  // "gpipe", "1f1b", "interleaved", "zero-bubble"
// From its name; InvalidArgument naming the choices otherwise.
PipelineSchedule pipelineScheduleFrom(std::string_view name);

// One thing a rank does in a step.
struct PipelineAction {
  enum class Kind : std::uint8_t {
    kForward,         // F: the stage's forward on a micro-batch, its activations kept
    kBackward,        // B: the whole backward (input and weight gradients)
    kBackwardInput,   // zero-bubble's B: the input gradient only, for the stage before
    kBackwardWeight,  // zero-bubble's W: the weight gradients
  };
  Kind kind = Kind::kForward;
  int microBatch = 0;
  int chunk = 0;  // which of the rank's stages: global stage chunk · p + rank

  bool operator==(const PipelineAction&) const = default;
};

// "F3", "B0", "I2", "W1", with ".c" for chunk c > 0: "F3.1".
std::string toString(const PipelineAction& action);

// What rank `rank` of a p-rank pipeline does in a step of m micro-batches, v stages per rank, in
// order. InvalidArgument when the schedule cannot run them: m < 1, p < 1, v < 1, v > 1 for a
// schedule other than interleaved, or interleaved with m not a multiple of p.
std::vector<PipelineAction> pipelineActions(PipelineSchedule schedule, int rank, int p, int m, int v = 1);

// The bubble of the schedule in theory (equal stage times, B = 2F, no communication): GPipe and
// 1F1B (p−1)/(m+p−1), interleaved (p−1)/(v·m+p−1); zero-bubble the same as 1F1B, an upper bound.
double idealBubble(PipelineSchedule schedule, int p, int m, int v = 1);
// The bubble the same schedule would have with these stages and free communication:
// `secondsPerMicroBatch` holds each pipeline rank's compute seconds per micro-batch (all its v
// stages, forward and backward), in rank order. A step then takes m times the slowest rank's
// time, plus the others' time to fill and drain the pipe, (sum − slowest) / v; each rank is idle
// for what its own m micro-batches leave of it; averaged over the ranks. Equal times give
// idealBubble; unequal ones (stages of unequal cost, or cores of unequal speed) give more. For
// zero-bubble it is 1F1B's, an upper bound, as idealBubble's is.
// InvalidArgument for an empty list, m < 1, v < 1 or a negative or non-finite time.
double stageTimesBubble(const std::vector<double>& secondsPerMicroBatch, int m, int v = 1);

// `layers` layers into `stages` contiguous stages of as equal counts as can be (the first stages
// take one more). InvalidArgument when there are fewer layers than stages.
std::vector<int> balanceEvenly(int layers, int stages);
// Contiguous stages minimising the largest sum of `cost` (each layer's measured seconds, or
// bytes); every stage gets at least one layer. InvalidArgument for fewer layers than stages or a
// negative or non-finite cost.
std::vector<int> balanceByCost(const std::vector<double>& cost, int stages);
// The layers' cost for balanceByCost: each layer's forward and backward seconds on `sample`, the
// median of `repeats` runs after two untimed ones, on this rank alone. Leaves the parameters
// without gradients.
std::vector<double> measureLayerSeconds(::torch::nn::Sequential layers, const ::torch::Tensor& sample,
                                        int repeats = 5);

// measureLayerSeconds one layer at a time, for a model too large to hold whole: each layer is
// timed on what the layer timed before it gave (the sample first) and may go once timed.
//
//   gyre::torch::LayerTimer timer(sample);
//   for (...each layer as it is made...) { seconds.push_back(timer.time(layer)); release(layer); }
class LayerTimer {
 public:
  explicit LayerTimer(::torch::Tensor sample, int repeats = 5);
  // The median of `repeats` forward and backward passes of `layer` after two untimed ones; its
  // output becomes the next layer's input. Leaves the layer's parameters without gradients.
  double time(::torch::nn::AnyModule& layer);

 private:
  ::torch::Tensor input_;
  int repeats_;
};

// This rank's stages of `layers` cut by `balance` (layer counts per global stage, summing to
// layers->size(), p · v of them): chunk c is global stage c · p + rank. The layers are shared
// with `layers`, not copied. InvalidArgument when balance does not fit.
std::vector<::torch::nn::Sequential> stagesOf(const ::torch::nn::Sequential& layers, const std::vector<int>& balance,
                                             int rank, int p);

// The layers stagesOf(layers, balance, rank, p) gives, as one module that holds them under their
// names in `layers` ("block3", ...): what a stage's rank writes in a checkpoint and loads back,
// without the layers of the other ranks' stages.
std::shared_ptr<::torch::nn::Module> namedStageLayers(const ::torch::nn::Sequential& layers,
                                                      const std::vector<int>& balance, int rank, int p);

// Every stage's parameters and buffers, from the rank that trained it, into `layers` on every
// rank of the pipeline group `comm` (whose layers were cut by `balance`, as for stagesOf): the
// whole trained model, to save or evaluate in one piece. Collective.
void gatherStages(const ::torch::nn::Sequential& layers, const std::vector<int>& balance, Communicator& comm);
// The same onto `root` alone, for a model no one rank holds while it trains: root gives memory to
// the layers it lacks (deferred.h: released ones) and receives them from the ranks that trained
// them; the others send theirs and keep only their own. Collective over the pipeline group.
void gatherStagesOnto(const ::torch::nn::Sequential& layers, const std::vector<int>& balance, Communicator& comm,
                      int root);

struct PipelineOptions {
  int microBatches = 4;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  // Keep only each stage's input per micro-batch and run its forward again in the backward:
  // activation memory for compute.
  bool recompute = false;
  // Where to record each F, B, I and W (compute track, named "F3", "B3.1", ...) and each exchange
  // of activations or gradients (communication track); may be null.
  std::shared_ptr<Timeline> timeline;
};

// Figures of the last step on this rank.
struct PipelineStepStats {
  double seconds = 0;        // the step, from its start to its last action's end
  double busySeconds = 0;    // in F, B and W (compute); the rest is waiting and communication
  double bubble() const { return seconds > 0 ? 1.0 - busySeconds / seconds : 0.0; }
  int peakHeld = 0;                     // micro-batches whose activations were held at once, at most
  std::int64_t peakActivationBytes = 0; // bytes of the tensors held for backward, at most
};

class Pipeline {
 public:
  using Loss = std::function<::torch::Tensor(const ::torch::Tensor& output, const ::torch::Tensor& target)>;

  // `stages`: this rank's v stages (stagesOf); comm: the pipeline group of p ranks, rank r of it
  // holding global stages r, r + p, ... InvalidArgument for an empty stage list or options the
  // schedule cannot run.
  Pipeline(std::vector<::torch::nn::Sequential> stages, std::shared_ptr<Communicator> comm, PipelineOptions options);

  // One forward and backward of the batch: `input` feeds the first stage, `target` the loss on
  // the last; every rank passes the same batch (the others use only its size). The loss must be a
  // mean over the micro-batch's samples. Gradients accumulate into the stages' parameters. Returns
  // the batch's loss, on every rank.
  double step(const ::torch::Tensor& input, const ::torch::Tensor& target, const Loss& loss);

  // Forward only, without gradients (evaluation), in micro-batches (fewer when the input has
  // fewer samples): the last stage's output on the rank that holds it, an undefined tensor
  // elsewhere.
  ::torch::Tensor forward(const ::torch::Tensor& input);

  // This rank's parameters, of every stage it holds.
  std::vector<::torch::Tensor> parameters() const;
  const std::vector<::torch::nn::Sequential>& stages() const { return stages_; }
  int rank() const { return rank_; }
  int size() const { return p_; }
  bool holdsFirstStage() const { return rank_ == 0; }
  bool holdsLastStage() const { return rank_ == p_ - 1; }
  const PipelineOptions& options() const { return options_; }
  const PipelineStepStats& lastStep() const { return stats_; }

  class Run;  // one step's state (pipeline.cc)

 private:
  // On the first step (or forward): every boundary's shape and dtype, from a one-sample forward
  // of each stage in turn. Collective over the group.
  void learnShapes(const ::torch::Tensor& input);

  std::vector<::torch::nn::Sequential> stages_;
  std::shared_ptr<Communicator> comm_;
  PipelineOptions options_;
  int rank_ = 0, p_ = 1, v_ = 1;
  // What crosses each boundary after global stage g: the shape past dimension 0 and the dtype,
  // learnt on the first step (empty until then).
  std::vector<std::optional<std::vector<std::int64_t>>> boundaryShape_;
  std::vector<::torch::ScalarType> boundaryType_;
  struct Plan;  // this rank's exchanges and actions of a step (pipeline_plan.h)
  std::shared_ptr<const Plan> plan_;
  PipelineStepStats stats_;
};

}  // namespace gyre::torch
