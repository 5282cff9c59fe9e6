#include "torch/pipeline_weights.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <map>
#include <unordered_map>
#include <utility>

namespace gyre::torch::pipeline {

namespace {

using ::torch::Tensor;
using ::torch::autograd::Edge;
using ::torch::autograd::Node;
using ::torch::autograd::variable_list;

// Keeps the gradients an op receives the first time it runs (the input pass).
struct KeepGradients : ::torch::autograd::FunctionPreHook {
  explicit KeepGradients(std::shared_ptr<variable_list> slot) : slot_(std::move(slot)) {}
  variable_list operator()(const variable_list& grads) override {
    if (slot_->empty()) *slot_ = grads;
    return grads;
  }
  std::shared_ptr<variable_list> slot_;
};

// Which ops of the graph reach the input's accumulator (are on the input gradient's path).
class Paths {
 public:
  explicit Paths(const Node* input) : input_(input) {}

  bool reachesInput(const std::shared_ptr<Node>& node) {
    const auto it = memo_.find(node.get());
    if (it != memo_.end()) return it->second;
    bool reaches = node.get() == input_;
    memo_[node.get()] = reaches;  // a graph has no cycles; this only stops repeats
    for (const Edge& e : node->next_edges())
      if (e.function && reachesInput(e.function)) reaches = true;
    memo_[node.get()] = reaches;
    if (reaches) onPath_.emplace_back(node);
    return reaches;
  }
  const std::vector<std::shared_ptr<Node>>& onPath() const { return onPath_; }

 private:
  const Node* input_;
  std::unordered_map<const Node*, bool> memo_;
  std::vector<std::shared_ptr<Node>> onPath_;
};

// The parameter accumulators below `node` (whose ops are off the input's path).
void accumulatorsBelow(const std::shared_ptr<Node>& node, std::map<const Node*, Edge>& out) {
  if (dynamic_cast<::torch::autograd::AccumulateGrad*>(node.get()) != nullptr) {
    out.emplace(node.get(), Edge(node, 0));
    return;
  }
  for (const Edge& e : node->next_edges())
    if (e.function) accumulatorsBelow(e.function, out);
}

}  // namespace

struct DeferredWeights::Frontier {
  std::shared_ptr<Node> op;
  std::shared_ptr<variable_list> grads;  // what the input pass handed it
  std::vector<std::size_t> towardsInput;  // its edges on the input's path, cut before W
  std::vector<Edge> accumulators;         // the parameters below its other edges
};

DeferredWeights::DeferredWeights(Tensor output, Tensor grad, std::vector<Tensor> params, const Tensor& input)
    : output_(std::move(output)), grad_(std::move(grad)), params_(std::move(params)) {
  if (!input.defined() || !input.requires_grad() || !output_.grad_fn()) return;
  const std::shared_ptr<Node> inputNode = ::torch::autograd::impl::try_get_grad_accumulator(input);
  if (!inputNode) return;
  Paths paths(inputNode.get());
  if (!paths.reachesInput(output_.grad_fn())) return;
  for (const std::shared_ptr<Node>& op : paths.onPath()) {
    Frontier f{op, std::make_shared<variable_list>(), {}, {}};
    std::map<const Node*, Edge> below;
    for (std::size_t i = 0; i < op->next_edges().size(); ++i) {
      const Edge& e = op->next_edges()[i];
      if (!e.function) continue;
      if (paths.reachesInput(e.function)) {
        f.towardsInput.push_back(i);
      } else {
        accumulatorsBelow(e.function, below);
      }
    }
    if (below.empty()) continue;
    for (auto& [node, edge] : below) f.accumulators.push_back(edge);
    op->add_pre_hook(std::make_unique<KeepGradients>(f.grads));
    frontier_.push_back(std::move(f));
  }
}

DeferredWeights::~DeferredWeights() = default;
DeferredWeights::DeferredWeights(DeferredWeights&&) noexcept = default;
DeferredWeights& DeferredWeights::operator=(DeferredWeights&&) noexcept = default;

std::size_t DeferredWeights::frontierOps() const {
  return frontier_.size();
}

void DeferredWeights::run(std::vector<DeferredWeights>& layers) {
  std::vector<Edge> roots, accumulators;
  variable_list inputs;
  for (DeferredWeights& layer : layers) {
    if (layer.frontier_.empty()) {  // no input pass: the whole backward to the parameters
      const std::vector<Tensor> grads =
          layer.grad_.defined() ? std::vector<Tensor>{layer.grad_} : std::vector<Tensor>{};
      ::torch::autograd::backward({layer.output_}, grads, false, false, layer.params_);
      continue;
    }
    for (Frontier& f : layer.frontier_) {
      // The input pass is done with these edges; without them the engine runs only the op's
      // parameter outputs. (Assigned in place: removing edges keeps the graph's order valid.)
      for (std::size_t i : f.towardsInput) f.op->next_edges()[i] = Edge();
      for (std::size_t i = 0; i < f.grads->size(); ++i) {
        if (!(*f.grads)[i].defined()) continue;  // no gradient reached this output of the op
        roots.emplace_back(f.op, static_cast<std::uint32_t>(i));
        inputs.push_back((*f.grads)[i]);
      }
      accumulators.insert(accumulators.end(), f.accumulators.begin(), f.accumulators.end());
    }
    layer.frontier_.clear();
  }
  if (roots.empty()) return;
  ::torch::autograd::Engine::get_default_engine().execute(roots, inputs, /*keep_graph=*/false,
                                                          /*create_graph=*/false, /*accumulate_grad=*/true,
                                                          accumulators);
}

}  // namespace gyre::torch::pipeline
