// The model gyre serve puts behind HTTP: a run directory of gyre train (its model.pt, rebuilt
// from config.json's model and shape: mlp, cnn, vit), or a TorchScript module a user saved with
// torch.jit.save. Each replica gets its own copy, in eval mode.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gyre::serve {

struct ServedModel {
  std::string name;                    // in the URLs
  std::string kind;                    // "mlp", "cnn", "vit" or "torchscript"
  std::vector<std::int64_t> rowShape;  // one input row: {1, 28, 28}; empty: whatever the request says
  // A new copy's forward pass, for one replica: [rows, ...] in, [rows, ...] out.
  std::function<std::function<::torch::Tensor(const ::torch::Tensor&)>()> makeReplica;
};

// `path`: a run directory, a model.pt with its run's config.json beside it, or a TorchScript
// file. `name` overrides the name (default: the built-in model's, or the file's stem). Throws
// gyre::Error naming the file and what is wrong with it (missing, not a model gyre can rebuild,
// a TorchScript module without forward).
ServedModel loadServedModel(const std::string& path, const std::string& name = "");

}  // namespace gyre::serve
