// A plain libtorch training loop on Fashion-MNIST, made data-parallel with gyre. The lines
// marked `// gyre` are all it takes; remove them and this is a single-process program again.
//
//   build/bin/gyre run -np 2 -- build/bin/gyre_example_train_fashion_mnist [EPOCHS]
//
// Each worker trains on its own shard of every batch (global batch 128, 64 per worker with two
// workers), and the averaged gradients keep the models identical, so two workers compute the
// same steps as one, in about half the time.
#include <gyre/torch.h>  // gyre
#include <torch/torch.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const std::string kData = "/usr/share/datasets/fashion-mnist/";  // Debian's dataset-fashion-mnist

std::vector<uint8_t> readGz(const std::string& path, size_t header) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (install dataset-fashion-mnist)");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  if (out.size() < header) throw std::runtime_error(path + " is truncated");
  out.erase(out.begin(), out.begin() + static_cast<long>(header));
  return out;
}

std::pair<torch::Tensor, torch::Tensor> load(const std::string& split) {
  auto images = readGz(kData + split + "-images-idx3-ubyte.gz", 16);
  auto labels = readGz(kData + split + "-labels-idx1-ubyte.gz", 8);
  const auto n = static_cast<int64_t>(labels.size());
  auto x = torch::from_blob(images.data(), {n, 1, 28, 28}, torch::kUInt8).to(torch::kFloat32).div(255).sub(0.2860).div(0.3530);
  auto y = torch::from_blob(labels.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return {x.clone(), y.clone()};
}

torch::nn::Sequential makeCnn() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

}  // namespace

int main(int argc, char** argv) try {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 1;
  const int64_t globalBatch = 128;
  auto comm = gyre::init();                                     // gyre: join the job gyre run started
  const int64_t batch = globalBatch / comm->size();              // gyre: each worker's share of a batch
  torch::manual_seed(0);
  auto [xTrain, yTrain] = load("train");
  auto [xTest, yTest] = load("t10k");

  auto model = makeCnn();
  gyre::torch::broadcastParameters(*model, *comm);               // gyre: start from rank 0's weights
  auto sgd = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  gyre::torch::DistributedOptimizer optimizer(comm, sgd);        // gyre: averages gradients during backward
  gyre::torch::DistributedSampler sampler(xTrain.size(0), comm->size(), comm->rank());  // gyre: this worker's shard

  for (int epoch = 0; epoch < epochs; ++epoch) {
    sampler.setEpoch(epoch);
    const auto mine = sampler.indices();
    const auto order = torch::tensor(mine, torch::kInt64);
    const int64_t steps = sampler.steps(batch);
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor loss;
    for (int64_t s = 0; s < steps; ++s) {
      const auto idx = order.slice(0, s * batch, (s + 1) * batch);
      optimizer.zeroGrad();
      loss = torch::nn::functional::cross_entropy(model->forward(xTrain.index_select(0, idx)), yTrain.index_select(0, idx));
      loss.backward();
      optimizer.step();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    torch::NoGradGuard noGrad;
    const double accuracy = model->forward(xTest).argmax(1).eq(yTest).to(torch::kFloat32).mean().item<double>();
    const auto mean = gyre::torch::allreduceMetrics(*comm, {loss.item<double>()});  // gyre: average over workers
    if (comm->rank() == 0)
      std::printf("epoch %d: loss %.4f, test accuracy %.2f%%, %.0f samples/s on %d workers\n", epoch + 1, mean[0],
                  100 * accuracy, static_cast<double>(steps * globalBatch) / seconds, comm->size());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
