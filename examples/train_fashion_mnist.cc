// A plain libtorch training loop on Fashion-MNIST, made data-parallel with gyre. The lines
// marked `// gyre` are all it takes; with them removed (and the sampler given 1 rank, rank 0) it
// is a single-process program again. The data comes through gyre::data (docs/data.md): the IDX
// files of Debian's dataset-fashion-mnist, each worker's batches, and a loader that assembles the
// next batches on a thread of its own while the model trains.
//
//   build/bin/gyre run -np 2 -- build/bin/gyre_example_train_fashion_mnist [EPOCHS]
//
// Each worker trains on its own shard of every batch (global batch 128, 64 per worker with two
// workers), and the averaged gradients keep the models identical, so two workers compute the
// same steps as one, in about half the time.
#include <gyre/torch.h>  // gyre
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

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
  const auto train = gyre::data::loadFashionMnist("", "train");  // Debian's dataset-fashion-mnist
  const auto test = gyre::data::loadFashionMnist("", "t10k");

  auto model = makeCnn();
  gyre::torch::broadcastParameters(*model, *comm);               // gyre: start from rank 0's weights
  auto sgd = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  gyre::torch::DistributedOptimizer optimizer(comm, sgd);        // gyre: averages gradients during backward
  gyre::data::DistributedBatchSampler sampler(train.size(), comm->size(), comm->rank(), batch);  // gyre: my shard

  for (int epoch = 0; epoch < epochs; ++epoch) {
    sampler.setEpoch(epoch);
    gyre::data::Loader loader(train, sampler);  // one thread, two batches ahead
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor loss;
    while (const gyre::data::Batch b = loader.next()) {
      optimizer.zeroGrad();
      loss = torch::nn::functional::cross_entropy(model->forward(b.images), b.labels);
      loss.backward();
      optimizer.step();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    torch::NoGradGuard noGrad;
    const double accuracy =
        model->forward(test.images).argmax(1).eq(test.labels).to(torch::kFloat32).mean().item<double>();
    const auto mean = gyre::torch::allreduceMetrics(*comm, {loss.item<double>()});  // gyre: average over workers
    if (comm->rank() == 0)
      std::printf("epoch %d: loss %.4f, test accuracy %.2f%%, %.0f samples/s on %d workers, %.1f ms waiting for data\n",
                  epoch + 1, mean[0], 100 * accuracy, static_cast<double>(loader.size() * globalBatch) / seconds,
                  comm->size(), loader.waitSeconds() * 1e3);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
