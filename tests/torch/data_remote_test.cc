// gyre::data::remoteStage: a Loader's transform run as gyre::rt tasks and actors in another
// runtime (two runtimes of this process over loopback): the same batches as the function run in
// place, on any number of loader threads; at most workers x inFlightPerWorker batches out at once
// (back-pressure); a remote error is that batch's error.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "gyre/rt.h"
#include "gyre/torch/data.h"
#include "gyre/torch/data_remote.h"
#include "support/rt_runtimes.h"

namespace gyre::data {
namespace data_remote_test {

std::atomic<int> running{0};
std::atomic<int> mostRunning{0};

// Flips each image left to right with probability 1/2, drawn from `seed`; slowly, counting how
// many run at once.
std::vector<::torch::Tensor> flipFromSeed(::torch::Tensor images, ::torch::Tensor labels, std::uint64_t seed) {
  const int now = ++running;
  for (int seen = mostRunning.load(); now > seen && !mostRunning.compare_exchange_weak(seen, now);) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const ::torch::Tensor flip = ::torch::rand({images.size(0)}, g) < 0.5;
  ::torch::Tensor out = ::torch::where(flip.view({-1, 1, 1, 1}), images.flip({3}), images);
  --running;
  return {out, labels + 1};
}
GYRE_RT_FUNCTION(flipFromSeed);

std::vector<::torch::Tensor> broken(::torch::Tensor, ::torch::Tensor, std::uint64_t) {
  throw std::runtime_error("no such augmentation");
}
GYRE_RT_FUNCTION(broken);

struct Flipper {
  std::vector<::torch::Tensor> apply(::torch::Tensor images, ::torch::Tensor labels, std::uint64_t seed) {
    return flipFromSeed(images, labels, seed);
  }
};
GYRE_RT_ACTOR(Flipper);
GYRE_RT_METHOD(Flipper, apply);

// The same function in place, its seed drawn as remoteStage draws it.
Transform inPlace() {
  return [](Batch& batch, at::Generator& random) {
    const auto seed = static_cast<std::uint64_t>(
        ::torch::randint(std::numeric_limits<std::int64_t>::max(), {1}, random, ::torch::kInt64).item<std::int64_t>());
    std::vector<::torch::Tensor> out = flipFromSeed(batch.images, batch.labels, seed);
    batch.images = out[0];
    batch.labels = out[1];
  };
}

class RemoteStage : public ::testing::Test {
 protected:
  void SetUp() override {
    runtimes_ = test::loopbackRuntimes(2, 2, createMemoryStore());
    data_.images = ::torch::randn({48, 1, 4, 5});
    data_.labels = ::torch::arange(48, ::torch::kInt64);
    running = 0;
    mostRunning = 0;
  }
  rt::Runtime& rt(int r) { return *runtimes_[static_cast<std::size_t>(r)]; }
  RemoteCall task(rt::Runtime& from, std::vector<::torch::Tensor> (*fn)(::torch::Tensor, ::torch::Tensor, std::uint64_t)) {
    return [&from, fn](::torch::Tensor i, ::torch::Tensor l, std::uint64_t seed) {
      return from.task(fn).options({.rank = 1}).remote(i, l, seed);
    };
  }
  std::vector<Batch> epoch(const std::vector<Transform>& transforms, int workers) {
    DistributedBatchSampler sampler(data_.size(), 1, 0, 6, {.seed = 1});
    Loader loader(data_, sampler, {.workers = workers, .prefetch = 4, .transforms = transforms, .seed = 9});
    std::vector<Batch> out;
    while (Batch b = loader.next()) out.push_back(b);
    return out;
  }
  std::vector<std::unique_ptr<rt::Runtime>> runtimes_;
  Dataset data_;
};

TEST_F(RemoteStage, TasksAndActorsGiveTheBatchesOfTheFunctionInPlace) {
  const std::vector<Batch> want = epoch({inPlace()}, 0);
  ASSERT_EQ(want.size(), 8u);
  auto actor = rt(0).actorWith<Flipper>({.rank = 1});
  const RemoteCall viaActor = [actor](::torch::Tensor i, ::torch::Tensor l, std::uint64_t seed) {
    return actor.call(&Flipper::apply, i, l, seed);
  };
  for (const Transform& stage : {remoteStage({task(rt(0), flipFromSeed)}), remoteStage({viaActor, task(rt(0), flipFromSeed)})})
    for (int workers : {0, 3}) {
      const std::vector<Batch> got = epoch({stage}, workers);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i].images.equal(want[i].images)) << "batch " << i << ", " << workers << " loader threads";
        EXPECT_TRUE(got[i].labels.equal(want[i].labels)) << "batch " << i;
      }
    }
}

TEST_F(RemoteStage, NoMoreBatchesOutThanTheWorkersMayHold) {
  // The remote runtime has 2 threads and the loader 4: only back-pressure keeps it to 1 at a time.
  epoch({remoteStage({task(rt(0), flipFromSeed)}, {.inFlightPerWorker = 1})}, 4);
  EXPECT_EQ(mostRunning.load(), 1);
}

TEST_F(RemoteStage, ARemoteErrorIsTheBatchsError) {
  DistributedBatchSampler sampler(data_.size(), 1, 0, 6, {.seed = 1});
  Loader loader(data_, sampler, {.workers = 2, .transforms = {remoteStage({task(rt(0), broken)})}});
  try {
    loader.next();
    ADD_FAILURE() << "no error";
  } catch (const rt::RemoteError& e) {
    EXPECT_NE(std::string(e.what()).find("no such augmentation"), std::string::npos) << e.what();
  }
  EXPECT_THROW(remoteStage({}), InvalidArgument);
  EXPECT_THROW(remoteStage({task(rt(0), broken)}, {.inFlightPerWorker = 0}), InvalidArgument);
}

}  // namespace data_remote_test
}  // namespace gyre::data
