// gyre::torch::Pipeline: runs a rank's plan (pipeline_plan.h) of one step: the stages' forwards
// and backwards on micro-batches, and the exchanges of activations and gradients between them.
#include "gyre/torch/pipeline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/broadcast.h"
#include "gyre/torch/deferred.h"
#include "torch/pipeline_plan.h"
#include "torch/pipeline_weights.h"

namespace gyre::torch {

namespace {

using Clock = std::chrono::steady_clock;
using ::torch::Tensor;
using Kind = PipelineAction::Kind;
using pipeline::Message;
using pipeline::PlanStep;

// A boundary's shape past dimension 0 and its dtype, sent once: [dtype, rank, dims...].
constexpr std::size_t kHeaderLength = 16;
constexpr int kHeaderTag = 0x5051;
constexpr int kDataTag = 0x5050;  // activations and gradients

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::int64_t bytesOf(const Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.numel() * t.element_size()) : 0;
}

// One layer's record of a micro-batch's forward: its input (a leaf, requiring a gradient when
// the stage needs the gradient of its input) and its output (for the last layer of the last
// stage: the micro-batch's weighted loss).
struct LayerRecord {
  Tensor input, output;
};

}  // namespace

// One step: the micro-batches, the messages in flight and what each micro-batch's stages hold.
class Pipeline::Run {
 public:
  Run(Pipeline& pipe, const Tensor& input, const Tensor& target, const Loss* loss, int m)
      : pipe_(pipe), input_(input), target_(target), loss_(loss) {
    const std::int64_t batch = input.size(0);
    GYRE_ARG_CHECK(batch >= m, "a batch of ", batch, " samples cannot be split into ", m, " micro-batches");
    for (int i = 0; i < m; ++i) {
      const std::int64_t size = batch / m + (i < batch % m ? 1 : 0);
      offsets_.push_back(i == 0 ? 0 : offsets_.back() + sizes_.back());
      sizes_.push_back(size);
    }
    batch_ = batch;
    stages_ = pipe.p_ * pipe.v_;
  }

  void follow(const std::vector<PlanStep>& plan) {
    Timeline* timeline = pipe_.options_.timeline.get();
    for (const PlanStep& step : plan) {
      const Clock::time_point start = Clock::now();
      if (step.action) {
        run(*step.action);
        const Clock::time_point end = Clock::now();
        pipe_.stats_.busySeconds += std::chrono::duration<double>(end - start).count();
        if (timeline) timeline->span(Timeline::Track::kCompute, toString(*step.action), start, end);
      } else if (exchange(step) && timeline) {
        timeline->span(Timeline::Track::kCommunication, "pipeline exchange", start, Clock::now());
      }
    }
  }

  double lossSum() const { return lossSum_; }
  Tensor lastOutput(int microBatch) const {
    const auto it = finalOutputs_.find(microBatch);
    return it == finalOutputs_.end() ? Tensor() : it->second;
  }

 private:
  int stageOf(const PipelineAction& a) const { return pipeline::globalStage(a.chunk, pipe_.rank_, pipe_.p_); }
  ::torch::nn::Sequential& layersOf(const PipelineAction& a) { return pipe_.stages_[static_cast<std::size_t>(a.chunk)]; }
  bool training() const { return loss_ != nullptr; }

  // The tensor a message carries, allocated to receive it: [micro-batch size, boundary shape...].
  Tensor allocate(const Message& msg) {
    const int boundary = std::min(msg.fromStage, msg.toStage);
    std::vector<std::int64_t> shape = {sizes_[static_cast<std::size_t>(msg.microBatch)]};
    const auto& rest = *pipe_.boundaryShape_[static_cast<std::size_t>(boundary)];
    shape.insert(shape.end(), rest.begin(), rest.end());
    return ::torch::empty(shape, ::torch::TensorOptions().dtype(pipe_.boundaryType_[static_cast<std::size_t>(boundary)]));
  }

  // Whether anything crossed to another rank.
  bool exchange(const PlanStep& step) {
    const int self = pipe_.rank_;
    std::vector<Tensor> keep;  // the buffers of the messages in flight
    std::vector<P2PMessage> sends, recvs;
    std::vector<Message> arriving;
    for (const Message& msg : step.sends) {
      const auto it = outbox_.find(key(msg));
      GYRE_ENFORCE(it != outbox_.end(), "pipeline: nothing to send for a planned message");
      Tensor out = it->second.contiguous();
      outbox_.erase(it);
      const int dst = pipeline::rankOfStage(msg.toStage, pipe_.p_);
      if (dst == self) {  // a stage of this rank: handed over
        inbox_[key(msg)] = out;
        continue;
      }
      sends.push_back({dst, out.data_ptr(), static_cast<std::size_t>(bytesOf(out))});
      keep.push_back(std::move(out));
    }
    for (const Message& msg : step.recvs) {
      const int src = pipeline::rankOfStage(msg.fromStage, pipe_.p_);
      if (src == self) continue;  // handed over by an earlier exchange, or just above
      Tensor in = allocate(msg);
      recvs.push_back({src, in.data_ptr(), static_cast<std::size_t>(bytesOf(in))});
      arriving.push_back(msg);
      keep.push_back(std::move(in));
    }
    if (sends.empty() && recvs.empty()) return false;
    // As bytes: the messages may carry different dtypes. The sizes are checked on receipt.
    pipe_.comm_->exchange(sends, recvs, P2POptions{DataType::kUInt8, kDataTag});
    for (std::size_t i = 0; i < arriving.size(); ++i) inbox_[key(arriving[i])] = keep[sends.size() + i];
    return true;
  }

  static std::tuple<bool, int, int> key(const Message& msg) {
    return {msg.gradient, msg.microBatch, msg.fromStage};
  }

  Tensor take(const Message& msg) {
    const auto it = inbox_.find(key(msg));
    GYRE_ENFORCE(it != inbox_.end(), "pipeline: a planned message has not come");
    Tensor t = std::move(it->second);
    inbox_.erase(it);
    return t;
  }

  Tensor microBatchOf(const Tensor& t, int microBatch) const {
    return t.narrow(0, offsets_[static_cast<std::size_t>(microBatch)], sizes_[static_cast<std::size_t>(microBatch)]);
  }

  // The stage's layers on x, one record per layer (each layer's input a fresh leaf, so that
  // backward can go layer by layer and the weight gradients can wait: zero-bubble).
  std::vector<LayerRecord> forwardLayers(::torch::nn::Sequential& layers, Tensor x, bool inputNeedsGradient) {
    std::vector<LayerRecord> records;
    bool needsGradient = inputNeedsGradient;
    for (auto& layer : *layers) {
      Tensor leaf = x.detach();
      if (needsGradient && leaf.is_floating_point()) leaf.requires_grad_(true);
      Tensor y = layer.any_forward(leaf).get<Tensor>();
      records.push_back({leaf, y});
      x = y;
      needsGradient = true;
    }
    return records;
  }

  void run(const PipelineAction& a) {
    switch (a.kind) {
      case Kind::kForward: return forward(a);
      case Kind::kBackward:
      case Kind::kBackwardInput: return backward(a);
      case Kind::kBackwardWeight: return weights(a);
    }
  }

  void forward(const PipelineAction& a) {
    const int g = stageOf(a);
    const bool first = g == 0, last = g == stages_ - 1;
    const Tensor stageInput = first ? microBatchOf(input_, a.microBatch) : take(Message{false, a.microBatch, g - 1, g});
    auto& layers = layersOf(a);
    Tensor y;
    std::vector<LayerRecord> records;
    if (!training() || pipe_.options_.recompute) {
      ::torch::NoGradGuard noGrad;
      y = layers->forward(stageInput);
    } else {
      records = forwardLayers(layers, stageInput, !first);
      y = records.back().output;
    }
    if (last) {
      if (!training()) {
        finalOutputs_[a.microBatch] = y;
      } else if (pipe_.options_.recompute) {
        ::torch::NoGradGuard noGrad;
        lossSum_ += weightedLoss(y, a.microBatch).item<double>();
      } else {
        records.back().output = weightedLoss(y, a.microBatch);
        lossSum_ += records.back().output.item<double>();
      }
    } else {
      outbox_[key(Message{false, a.microBatch, g, g + 1})] = y.detach();
    }
    if (!training()) return;
    Held& held = held_[{a.microBatch, a.chunk}];
    if (pipe_.options_.recompute) held.input = stageInput;
    held.records = std::move(records);
    account(+1, held);
  }

  Tensor weightedLoss(const Tensor& output, int microBatch) {
    const double share = static_cast<double>(sizes_[static_cast<std::size_t>(microBatch)]) / static_cast<double>(batch_);
    return (*loss_)(output, microBatchOf(target_, microBatch)) * share;
  }

  // B (the whole backward) or I (the input gradient only; the weight gradients wait for W).
  void backward(const PipelineAction& a) {
    const int g = stageOf(a);
    const bool last = g == stages_ - 1;
    Held& held = held_.at({a.microBatch, a.chunk});
    if (pipe_.options_.recompute) {  // the forward again, with its graph
      held.records = forwardLayers(layersOf(a), held.input, g != 0);
      if (last) held.records.back().output = weightedLoss(held.records.back().output, a.microBatch);
      account(0, held);
    }
    Tensor grad = last ? Tensor() : take(Message{true, a.microBatch, g + 1, g});
    const bool split = a.kind == Kind::kBackwardInput;
    auto& layers = layersOf(a);
    for (std::size_t l = held.records.size(); l-- > 0;) {
      LayerRecord& r = held.records[l];
      const std::vector<Tensor> params = parametersOf(*layers->ptr(l));
      const bool wantInput = r.input.requires_grad();
      const std::vector<Tensor> outputs = {r.output};
      const std::vector<Tensor> grads = gradients(grad);
      if (split) {
        if (!params.empty()) held.pending.emplace_back(r.output, grad, params, r.input);
        if (wantInput) grad = ::torch::autograd::grad(outputs, {r.input}, grads, /*retain_graph=*/true)[0];
        continue;
      }
      std::vector<Tensor> inputs = params;
      if (wantInput) inputs.push_back(r.input);
      if (!inputs.empty()) ::torch::autograd::backward(outputs, grads, false, false, inputs);
      if (wantInput) grad = r.input.grad();
    }
    if (g > 0) outbox_[key(Message{true, a.microBatch, g, g - 1})] = grad;
    if (!split || held.pending.empty()) release(a);
    else held.records.clear();
  }

  // W: the weight gradients the input-gradient pass left.
  void weights(const PipelineAction& a) {
    const auto it = held_.find({a.microBatch, a.chunk});
    if (it == held_.end()) return;  // the stage has no weights: its input pass released it
    Held& held = it->second;
    pipeline::DeferredWeights::run(held.pending);
    release(a);
  }

  // The gradient to start a backward from: none for the loss (a scalar, its gradient 1).
  static std::vector<Tensor> gradients(const Tensor& grad) {
    return grad.defined() ? std::vector<Tensor>{grad} : std::vector<Tensor>{};
  }

  static std::vector<Tensor> parametersOf(const ::torch::nn::Module& layer) {
    std::vector<Tensor> out;
    for (const Tensor& p : layer.parameters())
      if (p.requires_grad()) out.push_back(p);
    return out;
  }

  struct Held {
    Tensor input;  // recompute: the stage's input
    std::vector<LayerRecord> records;
    std::vector<pipeline::DeferredWeights> pending;  // zero-bubble's W, layer by layer
    std::int64_t bytes = 0;
  };

  void account(int delta, Held& held) {
    std::int64_t bytes = bytesOf(held.input);
    for (const LayerRecord& r : held.records) bytes += bytesOf(r.input) + bytesOf(r.output);
    heldBytes_ += bytes - held.bytes;
    held.bytes = bytes;
    heldCount_ += delta;
    PipelineStepStats& s = pipe_.stats_;
    s.peakHeld = std::max(s.peakHeld, heldCount_);
    s.peakActivationBytes = std::max(s.peakActivationBytes, heldBytes_);
  }

  void release(const PipelineAction& a) {
    const auto it = held_.find({a.microBatch, a.chunk});
    heldBytes_ -= it->second.bytes;
    --heldCount_;
    held_.erase(it);
  }

  Pipeline& pipe_;
  const Tensor& input_;
  const Tensor& target_;
  const Loss* loss_;
  std::int64_t batch_ = 0;
  int stages_ = 1;
  std::vector<std::int64_t> offsets_, sizes_;
  std::map<std::tuple<bool, int, int>, Tensor> outbox_, inbox_;
  std::map<std::pair<int, int>, Held> held_;  // by micro-batch and chunk
  std::map<int, Tensor> finalOutputs_;
  int heldCount_ = 0;
  std::int64_t heldBytes_ = 0;
  double lossSum_ = 0;
};

struct Pipeline::Plan {
  std::vector<pipeline::PlanStep> steps;
};

Pipeline::Pipeline(std::vector<::torch::nn::Sequential> stages, std::shared_ptr<Communicator> comm,
                   PipelineOptions options)
    : stages_(std::move(stages)), comm_(std::move(comm)), options_(options) {
  GYRE_ARG_CHECK(comm_ != nullptr, "a pipeline needs a communicator");
  GYRE_ARG_CHECK(!stages_.empty(), "a pipeline rank needs at least one stage");
  for (std::size_t c = 0; c < stages_.size(); ++c)
    GYRE_ARG_CHECK(stages_[c] && !stages_[c]->is_empty(), "pipeline stage ", c, " of this rank has no layers");
  rank_ = comm_->rank(), p_ = comm_->size(), v_ = static_cast<int>(stages_.size());
  (void)pipelineActions(options_.schedule, rank_, p_, options_.microBatches, v_);  // refuses what cannot run
  boundaryShape_.assign(static_cast<std::size_t>(p_ * v_), std::nullopt);
  boundaryType_.assign(static_cast<std::size_t>(p_ * v_), ::torch::kFloat32);
  // The same every step (batched plans are walked together, once).
  plan_ = std::make_shared<const Plan>(Plan{pipeline::planOf(options_.schedule, rank_, p_, options_.microBatches, v_)});
}

void Pipeline::learnShapes(const ::torch::Tensor& input) {
  const int stages = p_ * v_;
  if (stages == 1 || boundaryShape_[0]) return;
  // Stage by stage, each owner runs its stage on one sample (its input: the batch's first, or
  // zeros of the shape that came) and sends the output's shape and dtype on, before any data
  // moves: a pipeline's messages between two ranks then carry data only, in plan order.
  ::torch::NoGradGuard noGrad;
  std::vector<bool> training;
  for (auto& stage : stages_) training.push_back(stage->is_training()), stage->eval();  // no statistics move
  Tensor carried;  // the previous stage's output, when this rank holds it
  for (int g = 0; g < stages; ++g) {
    const int owner = pipeline::rankOfStage(g, p_);
    if (owner != rank_) continue;
    Tensor x;
    if (g == 0) {
      x = input.narrow(0, 0, 1);
    } else if (pipeline::rankOfStage(g - 1, p_) == rank_) {
      x = carried;
    } else {
      std::array<std::int64_t, kHeaderLength> header{};
      comm_->recv(header.data(), kHeaderLength, pipeline::rankOfStage(g - 1, p_), P2POptions{DataType::kInt64, kHeaderTag});
      const auto b = static_cast<std::size_t>(g - 1);
      boundaryType_[b] = static_cast<::torch::ScalarType>(header[0]);
      boundaryShape_[b] = std::vector<std::int64_t>(header.begin() + 2, header.begin() + 2 + header[1]);
      std::vector<std::int64_t> shape = {1};
      shape.insert(shape.end(), boundaryShape_[b]->begin(), boundaryShape_[b]->end());
      x = ::torch::zeros(shape, ::torch::TensorOptions().dtype(boundaryType_[b]));
    }
    carried = stages_[static_cast<std::size_t>(g / p_)]->forward(x);
    if (g == stages - 1) break;
    GYRE_ARG_CHECK(carried.dim() >= 1 && carried.dim() <= static_cast<std::int64_t>(kHeaderLength) - 2,
                   "pipeline stage ", g, "'s output has ", carried.dim(),
                   " dimensions; a stage's output is [micro-batch, ...] with at most ", kHeaderLength - 3, " more");
    std::array<std::int64_t, kHeaderLength> header{};
    header[0] = static_cast<std::int64_t>(carried.scalar_type());
    header[1] = carried.dim() - 1;
    for (std::int64_t d = 1; d < carried.dim(); ++d) header[static_cast<std::size_t>(d + 1)] = carried.size(d);
    const auto b = static_cast<std::size_t>(g);
    boundaryType_[b] = carried.scalar_type();
    boundaryShape_[b] = std::vector<std::int64_t>(header.begin() + 2, header.begin() + 2 + header[1]);
    if (const int next = pipeline::rankOfStage(g + 1, p_); next != rank_)
      comm_->send(header.data(), kHeaderLength, next, P2POptions{DataType::kInt64, kHeaderTag});
  }
  for (std::size_t c = 0; c < stages_.size(); ++c) stages_[c]->train(training[c]);
  // The boundaries this rank's stages touch are known; mark the others, so the probe runs once.
  for (auto& shape : boundaryShape_)
    if (!shape) shape = std::vector<std::int64_t>{};
}

double Pipeline::step(const ::torch::Tensor& input, const ::torch::Tensor& target, const Loss& loss) {
  GYRE_ARG_CHECK(input.defined() && input.dim() >= 1 && target.defined() && target.size(0) == input.size(0),
                 "a pipeline step needs an input and a target with the same number of samples");
  learnShapes(input);
  stats_ = {};
  const Clock::time_point start = Clock::now();
  Run run(*this, input, target, &loss, options_.microBatches);
  run.follow(plan_->steps);
  double total = run.lossSum();
  comm_->broadcast(&total, 1, BroadcastOptions{DataType::kFloat64, p_ - 1});
  stats_.seconds = secondsSince(start);
  return total;
}

::torch::Tensor Pipeline::forward(const ::torch::Tensor& input) {
  GYRE_ARG_CHECK(input.defined() && input.dim() >= 1, "a pipeline forward needs an input of [batch, ...]");
  learnShapes(input);
  ::torch::NoGradGuard noGrad;
  const int m = static_cast<int>(std::min<std::int64_t>(options_.microBatches, input.size(0)));
  std::vector<PipelineAction> actions;
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < v_; ++c) actions.push_back({PipelineAction::Kind::kForward, i, c});
  Run run(*this, input, input, nullptr, m);
  run.follow(pipeline::planOfActions(actions, rank_, p_, v_));
  if (!holdsLastStage()) return {};
  std::vector<Tensor> outputs;
  for (int i = 0; i < m; ++i) outputs.push_back(run.lastOutput(i));
  return ::torch::cat(outputs);
}

std::vector<::torch::Tensor> Pipeline::parameters() const {
  std::vector<Tensor> out;
  for (const auto& stage : stages_)
    for (const Tensor& p : stage->parameters()) out.push_back(p);
  return out;
}

std::vector<::torch::nn::Sequential> stagesOf(const ::torch::nn::Sequential& layers, const std::vector<int>& balance,
                                             int rank, int p) {
  GYRE_ARG_CHECK(p >= 1 && rank >= 0 && rank < p, "pipeline rank ", rank, " of ", p);
  const int stages = static_cast<int>(balance.size());
  GYRE_ARG_CHECK(stages >= p && stages % p == 0, "a balance of ", stages, " stages does not give each of the ", p,
                 " pipeline ranks the same number of stages");
  std::int64_t sum = 0;
  for (int n : balance) {
    GYRE_ARG_CHECK(n >= 1, "a balance gives a stage ", n, " layers; each needs at least one");
    sum += n;
  }
  GYRE_ARG_CHECK(sum == static_cast<std::int64_t>(layers->size()), "the balance's stages hold ", sum,
                 " layers, but the model has ", layers->size());
  std::vector<::torch::nn::Sequential> out;
  std::size_t first = 0;
  for (int g = 0; g < stages; ++g) {
    const auto count = static_cast<std::size_t>(balance[static_cast<std::size_t>(g)]);
    if (g % p == rank) {
      ::torch::nn::Sequential stage;
      for (std::size_t i = first; i < first + count; ++i) stage->push_back(*(layers->begin() + static_cast<std::ptrdiff_t>(i)));
      out.push_back(stage);
    }
    first += count;
  }
  return out;
}

std::shared_ptr<::torch::nn::Module> namedStageLayers(const ::torch::nn::Sequential& layers,
                                                      const std::vector<int>& balance, int rank, int p) {
  std::set<const ::torch::nn::Module*> mine;
  for (const ::torch::nn::Sequential& stage : stagesOf(layers, balance, rank, p))
    for (const auto& child : stage->children()) mine.insert(child.get());
  auto out = std::make_shared<::torch::nn::Module>("StageLayers");
  for (const auto& child : layers->named_children())
    if (mine.count(child.value().get()) > 0) out->register_module(child.key(), child.value());
  return out;
}

void gatherStages(const ::torch::nn::Sequential& layers, const std::vector<int>& balance, Communicator& comm) {
  for (int owner = 0; owner < comm.size(); ++owner)
    for (::torch::nn::Sequential& stage : stagesOf(layers, balance, owner, comm.size()))
      broadcastParameters(*stage, comm, owner);
}

void gatherStagesOnto(const ::torch::nn::Sequential& layers, const std::vector<int>& balance, Communicator& comm,
                      int root) {
  GYRE_ARG_CHECK(root >= 0 && root < comm.size(), "gatherStagesOnto: root ", root, " of ", comm.size());
  constexpr int kStageTag = 0x5053;
  ::torch::NoGradGuard noGrad;
  for (int owner = 0; owner < comm.size(); ++owner) {
    if (owner == root || (comm.rank() != root && comm.rank() != owner)) continue;
    for (::torch::nn::Sequential& stage : stagesOf(layers, balance, owner, comm.size())) {
      if (comm.rank() == root) materialiseParameters(*stage);
      for (const auto& tensors : {stage->parameters(), stage->buffers()}) {
        for (const Tensor& t : tensors) {
          const P2POptions o{toDataType(t.scalar_type()), kStageTag, Timeout{0}};
          const auto count = static_cast<std::size_t>(t.numel());
          if (comm.rank() == owner) {
            const Tensor out = t.contiguous();
            comm.send(out.data_ptr(), count, root, o);
          } else if (t.is_contiguous()) {
            comm.recv(t.data_ptr(), count, owner, o);
          } else {
            Tensor in = ::torch::empty_like(t, ::torch::MemoryFormat::Contiguous);
            comm.recv(in.data_ptr(), count, owner, o);
            t.copy_(in);
          }
        }
      }
    }
  }
}

LayerTimer::LayerTimer(::torch::Tensor sample, int repeats) : input_(std::move(sample)), repeats_(repeats) {
  GYRE_ARG_CHECK(repeats >= 1, "LayerTimer: repeats must be at least 1");
}

double LayerTimer::time(::torch::nn::AnyModule& layer) {
  // The first runs pay for allocations and kernels' set-up (the first convolution's: ten times
  // its steady time): they are not counted.
  constexpr int kWarmup = 2;
  std::vector<double> runs;
  Tensor out;
  for (int r = -kWarmup; r < repeats_; ++r) {
    Tensor leaf = input_.detach();
    if (leaf.is_floating_point()) leaf.requires_grad_(true);
    const Clock::time_point start = Clock::now();
    Tensor y = layer.any_forward(leaf).get<Tensor>();
    if (y.is_floating_point() && y.requires_grad()) y.backward(::torch::ones_like(y));
    if (r >= 0) runs.push_back(secondsSince(start));
    out = y.detach();
  }
  for (auto& p : layer.ptr()->parameters()) p.mutable_grad() = Tensor();  // the measurement's, not the model's
  input_ = out;
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

std::vector<double> measureLayerSeconds(::torch::nn::Sequential layers, const ::torch::Tensor& sample, int repeats) {
  GYRE_ARG_CHECK(repeats >= 1, "measureLayerSeconds: repeats must be at least 1");
  LayerTimer timer(sample, repeats);
  std::vector<double> out;
  for (auto& layer : *layers) out.push_back(timer.time(layer));
  return out;
}

}  // namespace gyre::torch
