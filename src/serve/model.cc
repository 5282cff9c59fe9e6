// The models gyre serve loads from files (gyre/serve.h's loadServedModel).
#include "gyre/serve.h"

#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gyre/errors.h"
#include "train/models.h"

namespace gyre::serve {
namespace {

namespace fs = std::filesystem;

nlohmann::json readConfig(const fs::path& config) {
  std::ifstream in(config);
  if (!in) throw Error("cannot read " + config.string());
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw Error(config.string() + " is not gyre train's config.json (not a JSON object)");
  return j;
}

// A model gyre train saved: config.json names it and its shape; model.pt holds its parameters.
ServedModel builtIn(const fs::path& weights, const fs::path& config, const std::string& name) {
  const nlohmann::json j = readConfig(config);
  const std::string model = j.value("model", "");
  const std::vector<std::string> known = train::modelNames();
  if (std::find(known.begin(), known.end(), model) == known.end())
    throw Error(config.string() + " names model '" + model + "', which is not one gyre serve can rebuild");
  const bool syncBn = j.value("sync_bn", false);
  train::VitOptions vit;
  if (const auto it = j.find("vit"); it != j.end() && it->is_object()) {
    vit.depth = it->value("depth", vit.depth);
    vit.width = it->value("width", vit.width);
    vit.heads = it->value("heads", vit.heads);
    vit.patch = it->value("patch", vit.patch);
  }
  // A model trained on gyre train --data: the images' shape and the classes (config.json's
  // input_shape and classes; Fashion-MNIST's without them).
  train::ModelShape shape;
  if (const auto it = j.find("input_shape"); it != j.end() && it->is_array() && it->size() == 3) {
    shape.channels = (*it)[0].get<int>();
    shape.height = (*it)[1].get<int>();
    shape.width = (*it)[2].get<int>();
  }
  shape.classes = j.value("classes", shape.classes);
  auto load = [weights, model, syncBn, vit, shape]() -> ::torch::nn::Sequential {
    ::torch::nn::Sequential net = train::makeModel(model, syncBn, vit, shape);
    try {
      ::torch::load(net, weights.string());
    } catch (const c10::Error& e) {
      throw Error("cannot load " + weights.string() + " as gyre train's " + model + ": " +
                  e.what_without_backtrace());
    }
    net->eval();
    return net;
  };
  load();  // refuse a file that does not load before anything serves
  ServedModel s;
  s.name = name.empty() ? model : name;
  s.kind = model;
  s.rowShape = {shape.channels, shape.height, shape.width};
  s.makeReplica = [load]() -> Forward {
    ::torch::nn::Sequential net = load();
    return [net](const ::torch::Tensor& x) mutable { return net->forward(x); };
  };
  return s;
}

ServedModel torchScript(const fs::path& file, const std::string& name) {
  auto load = [file]() {
    try {
      ::torch::jit::Module m = ::torch::jit::load(file.string());
      m.eval();
      return m;
    } catch (const c10::Error& e) {
      throw Error("cannot load " + file.string() + " as a TorchScript module: " + e.what_without_backtrace());
    }
  };
  ::torch::jit::Module first = load();
  if (!first.find_method("forward"))
    throw Error(file.string() +
                " has no forward method: a TorchScript module saved with torch.jit.save serves as it is, "
                "a model.pt of gyre train with its run directory (or its config.json beside it)");
  ServedModel s;
  s.name = name.empty() ? file.stem().string() : name;
  s.kind = "torchscript";
  s.makeReplica = [load]() -> Forward {
    auto m = std::make_shared<::torch::jit::Module>(load());
    return [m](const ::torch::Tensor& x) {
      const ::torch::jit::IValue out = m->forward({x});
      if (!out.isTensor()) throw Error("the TorchScript module's forward returned a " + out.tagKind() + ", not a tensor");
      return out.toTensor();
    };
  };
  return s;
}

}  // namespace

ServedModel loadServedModel(const std::string& path, const std::string& name) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    const fs::path weights = p / "model.pt", config = p / "config.json";
    if (!fs::exists(weights))
      throw Error(path + " holds no model.pt: give a run directory of gyre train that ran to its end");
    return builtIn(weights, config, name);
  }
  if (!fs::exists(p, ec)) throw Error(path + ": no such file or directory");
  if (fs::exists(p.parent_path() / "config.json", ec) && p.filename() == "model.pt")
    return builtIn(p, p.parent_path() / "config.json", name);
  return torchScript(p, name);
}

}  // namespace gyre::serve
