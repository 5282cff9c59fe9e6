// gyre::data's batches: DistributedBatchSampler (the ranks' batches cover the epoch, disjoint,
// the same for the same seed, another order every epoch, the uneven last batch dropped or kept,
// and the very batches `gyre train` cut by hand before it used the loader), and Loader (the same
// batches in the same order whatever its threads, the prefetch bound, errors reaching next(),
// destruction mid-epoch, the wait it measures).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gyre/errors.h"
#include "gyre/torch/data.h"
#include "gyre/torch/sampler.h"

namespace gyre::data {
namespace {

using Indices = std::vector<std::int64_t>;
using Batches = std::vector<Indices>;
using namespace std::chrono_literals;

Batches batchesOf(std::int64_t n, int ranks, int rank, std::int64_t batch, std::int64_t epoch,
                  BatchSamplerOptions options = {}) {
  DistributedBatchSampler sampler(n, ranks, rank, batch, options);
  sampler.setEpoch(epoch);
  EXPECT_EQ(static_cast<std::int64_t>(sampler.batches().size()), sampler.size());
  return sampler.batches();
}

Indices flatten(const Batches& batches) {
  Indices out;
  for (const Indices& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// n samples: image i is filled with i, label i is i % 10.
Dataset numbered(std::int64_t n) {
  Dataset d;
  d.images = ::torch::arange(n, ::torch::kFloat32).reshape({n, 1, 1, 1}).expand({n, 1, 2, 2}).contiguous();
  d.labels = ::torch::arange(n, ::torch::kInt64).remainder(10);
  return d;
}

// Every batch a loader hands out, then checks that the end stays the end.
std::vector<Batch> drain(Loader& loader) {
  std::vector<Batch> out;
  while (Batch b = loader.next()) out.push_back(b);
  EXPECT_FALSE(static_cast<bool>(loader.next()));
  return out;
}

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(DistributedBatchSampler, RanksCoverTheEpochDisjointly) {
  for (int ranks : {1, 2, 3, 4}) {
    const std::int64_t n = 600;  // divisible by every world here, and by the batch of 10
    std::vector<std::int64_t> all;
    for (int r = 0; r < ranks; ++r) {
      const Batches b = batchesOf(n, ranks, r, 10, 0);
      EXPECT_EQ(static_cast<std::int64_t>(b.size()), n / ranks / 10);
      for (const Indices& batch : b) EXPECT_EQ(batch.size(), 10u);
      const Indices mine = flatten(b);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    Indices expected(static_cast<std::size_t>(n));
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected) << ranks << " ranks";  // each sample once: disjoint and complete
  }
}

TEST(DistributedBatchSampler, SameSeedSameBatchesOtherEpochOtherOrder) {
  const BatchSamplerOptions seeded{.seed = 42};
  EXPECT_EQ(batchesOf(1000, 2, 1, 16, 3, seeded), batchesOf(1000, 2, 1, 16, 3, seeded));
  EXPECT_NE(batchesOf(1000, 2, 1, 16, 3, seeded), batchesOf(1000, 2, 1, 16, 4, seeded));
  EXPECT_NE(batchesOf(1000, 2, 1, 16, 3, seeded), batchesOf(1000, 2, 1, 16, 3, {.seed = 43}));
  // Another epoch is another order of the same samples.
  Indices a = flatten(batchesOf(1000, 1, 0, 10, 0, seeded));
  Indices b = flatten(batchesOf(1000, 1, 0, 10, 1, seeded));
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  // Without shuffling: in order.
  EXPECT_EQ(batchesOf(6, 2, 0, 2, 5, {.shuffle = false}), (Batches{{0, 2}}));
}

TEST(DistributedBatchSampler, UnevenLastBatchIsDroppedByDefault) {
  // 50 samples on 2 ranks: 25 each, batches of 8: 3 full ones, and 1 left over.
  for (int r = 0; r < 2; ++r) {
    const Batches dropped = batchesOf(50, 2, r, 8, 0);
    ASSERT_EQ(dropped.size(), 3u);
    for (const Indices& b : dropped) EXPECT_EQ(b.size(), 8u);
    const Batches kept = batchesOf(50, 2, r, 8, 0, {.dropLastBatch = false});
    ASSERT_EQ(kept.size(), 4u);
    EXPECT_EQ(kept.back().size(), 1u);  // the same length on every rank
    EXPECT_EQ(Batches(kept.begin(), kept.begin() + 3), dropped);
    EXPECT_EQ(DistributedBatchSampler(50, 2, r, 8).size(), 3);
    EXPECT_EQ(DistributedBatchSampler(50, 2, r, 8, {.dropLastBatch = false}).size(), 4);
  }
  // Kept, the two ranks' batches together are the whole (padded) epoch.
  Indices both = flatten(batchesOf(50, 2, 0, 8, 0, {.dropLastBatch = false}));
  const Indices other = flatten(batchesOf(50, 2, 1, 8, 0, {.dropLastBatch = false}));
  both.insert(both.end(), other.begin(), other.end());
  EXPECT_EQ(std::set<std::int64_t>(both.begin(), both.end()).size(), 50u);
}

TEST(DistributedBatchSampler, ShardsArePaddedOrDroppedAsDistributedSamplersAre) {
  // 10 samples on 4 ranks: padded to 3 each (2 repeated), or cut to 2 each.
  EXPECT_EQ(flatten(batchesOf(10, 4, 3, 1, 0, {.dropLastBatch = false})).size(), 3u);
  EXPECT_EQ(flatten(batchesOf(10, 4, 3, 1, 0, {.dropLast = true})).size(), 2u);
}

// The batches gyre train cut before it used gyre::data: DistributedSampler's indices, sliced into
// consecutive per-rank batches, partial last batch dropped (sampler.steps(batch)).
TEST(DistributedBatchSampler, MatchesTheTrainersFormerSlices) {
  for (int ranks : {1, 2, 3}) {
    const std::int64_t batch = 384 / ranks / 3;
    for (int rank = 0; rank < ranks; ++rank) {
      for (std::int64_t epoch : {0, 1, 7}) {
        gyre::torch::DistributedSampler former(60000, ranks, rank, {.seed = 5});
        former.setEpoch(epoch);
        const Indices order = former.indices();
        Batches expected;
        for (std::int64_t s = 0; s < former.steps(batch); ++s)
          expected.emplace_back(order.begin() + s * batch, order.begin() + (s + 1) * batch);
        EXPECT_EQ(batchesOf(60000, ranks, rank, batch, epoch, {.seed = 5}), expected)
            << ranks << " ranks, rank " << rank << ", epoch " << epoch;
      }
    }
  }
}

TEST(DistributedBatchSampler, RefusesBadArguments) {
  EXPECT_THROW(DistributedBatchSampler(10, 2, 0, 0), InvalidArgument);
  EXPECT_THROW(DistributedBatchSampler(10, 2, 2, 4), InvalidArgument);
  EXPECT_THROW(DistributedBatchSampler(-1, 1, 0, 4), InvalidArgument);
}

TEST(Loader, SameBatchesInTheSameOrderWhateverTheThreads) {
  const Dataset data = numbered(300);
  DistributedBatchSampler sampler(300, 2, 1, 7, {.seed = 9, .dropLastBatch = false});
  sampler.setEpoch(2);
  const Batches expected = sampler.batches();
  std::vector<std::vector<Batch>> runs;
  for (int workers : {0, 1, 3}) {
    for (int prefetch : {1, 2, 5}) {
      Loader loader(data, sampler, {.workers = workers, .prefetch = prefetch});
      EXPECT_EQ(loader.size(), static_cast<std::int64_t>(expected.size()));
      runs.push_back(drain(loader));
      EXPECT_EQ(loader.returned(), loader.size());
    }
  }
  for (const std::vector<Batch>& run : runs) {
    ASSERT_EQ(run.size(), expected.size());
    for (std::size_t i = 0; i < run.size(); ++i) {
      const Batch& b = run[i];
      EXPECT_EQ(b.index, static_cast<std::int64_t>(i));
      const auto index = ::torch::tensor(expected[i], ::torch::kInt64);
      EXPECT_TRUE(b.images.equal(data.images.index_select(0, index))) << "batch " << i;
      EXPECT_TRUE(b.labels.equal(data.labels.index_select(0, index))) << "batch " << i;
      EXPECT_EQ(b.size(), static_cast<std::int64_t>(expected[i].size()));
      EXPECT_TRUE(b.images.is_contiguous());
    }
  }
}

TEST(Loader, ExplicitIndexListsAndAnEmptyEpoch) {
  const Dataset data = numbered(20);
  Loader loader(data, Batches{{3, 3, 19}, {0}, {}});
  const std::vector<Batch> got = drain(loader);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].images.flatten(1).select(1, 0).equal(::torch::tensor({3.f, 3.f, 19.f})));
  EXPECT_TRUE(got[1].labels.equal(::torch::tensor({std::int64_t{0}})));
  EXPECT_EQ(got[2].size(), 0);
  Loader none(data, Batches{}, {.workers = 2});
  EXPECT_FALSE(static_cast<bool>(none.next()));
}

TEST(Loader, NeverMoreThanPrefetchBatchesAhead) {
  const Dataset data = numbered(100);
  Batches batches;
  for (std::int64_t i = 0; i < 20; ++i) batches.push_back({i});
  std::atomic<std::int64_t> started{0};
  std::atomic<std::int64_t> highest{-1};
  LoaderOptions options{.workers = 3, .prefetch = 2};
  options.onAssemble = [&](std::int64_t i) {
    started.fetch_add(1);
    std::int64_t seen = highest.load();
    while (i > seen && !highest.compare_exchange_weak(seen, i)) {
    }
  };
  Loader loader(data, batches, options);
  // Nothing taken yet: exactly batches 0 and 1 are started, though three threads could.
  ASSERT_TRUE(eventually([&] { return started.load() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(highest.load(), 1);
  for (std::int64_t taken = 1; taken <= 20; ++taken) {
    ASSERT_EQ(loader.next().index, taken - 1);
    // Batch i starts only once batch i - 2 is returned.
    const std::int64_t allowed = std::min<std::int64_t>(taken + 2, 20);
    ASSERT_TRUE(eventually([&] { return started.load() == allowed; })) << started.load() << " " << allowed;
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(started.load(), allowed);
    EXPECT_EQ(highest.load(), allowed - 1);
  }
  EXPECT_FALSE(static_cast<bool>(loader.next()));
}

TEST(Loader, AWorkersErrorReachesNextInOrder) {
  const Dataset data = numbered(50);
  for (int workers : {0, 1, 3}) {
    // Batch 2 has an index outside the data set; batch 4 throws from the hook.
    Batches batches = {{0}, {1}, {2, 999}, {3}, {4}};
    Loader loader(data, batches, {.workers = workers});
    EXPECT_EQ(loader.next().index, 0);
    EXPECT_EQ(loader.next().index, 1);
    EXPECT_ANY_THROW(loader.next()) << workers << " workers";
    EXPECT_ANY_THROW(loader.next()) << "the error stays";

    LoaderOptions options{.workers = workers};
    options.onAssemble = [](std::int64_t i) {
      if (i == 4) throw std::runtime_error("batch 4 broke");
    };
    Loader hooked(data, Batches{{0}, {1}, {2}, {3}, {4}, {5}}, options);
    for (std::int64_t i = 0; i < 4; ++i) EXPECT_EQ(hooked.next().index, i);
    try {
      hooked.next();
      ADD_FAILURE() << "no error from batch 4";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "batch 4 broke");
    }
  }
}

TEST(Loader, DestroyedMidEpochReturns) {
  const Dataset data = numbered(1000);
  Batches batches;
  for (std::int64_t i = 0; i < 500; ++i) batches.push_back({i, (i * 7) % 1000});
  for (int workers : {1, 3}) {
    const auto begin = std::chrono::steady_clock::now();
    {
      Loader loader(data, batches, {.workers = workers, .prefetch = 4});
      EXPECT_EQ(loader.next().index, 0);
      EXPECT_EQ(loader.next().index, 1);
    }
    {
      Loader untouched(data, batches, {.workers = workers});  // never asked for a batch
    }
    {
      // A thread in the middle of a slow batch: finished, then no more are started.
      std::atomic<int> calls{0};
      LoaderOptions slow{.workers = workers, .prefetch = 3};
      slow.onAssemble = [&](std::int64_t) {
        ++calls;
        std::this_thread::sleep_for(20ms);
      };
      Loader loader(data, batches, slow);
      ASSERT_TRUE(eventually([&] { return calls.load() >= 1; }));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
  }
}

TEST(Loader, MeasuresTheWaitInNext) {
  const Dataset data = numbered(10);
  LoaderOptions slow{.workers = 1, .prefetch = 1};
  slow.onAssemble = [](std::int64_t) { std::this_thread::sleep_for(30ms); };
  Loader loader(data, Batches{{0}, {1}}, slow);
  EXPECT_EQ(loader.waitSeconds(), 0);
  ASSERT_TRUE(static_cast<bool>(loader.next()));
  const double first = loader.lastWaitSeconds();
  EXPECT_GT(first, 0.005);  // it waited for the slow batch 0
  ASSERT_TRUE(static_cast<bool>(loader.next()));
  EXPECT_GT(loader.lastWaitSeconds(), 0.005);  // batch 1 started only after batch 0 was taken
  EXPECT_NEAR(loader.waitSeconds(), first + loader.lastWaitSeconds(), 1e-12);
  // Ready batches cost (almost) nothing to take.
  Loader fast(data, Batches{{0}, {1}, {2}}, {.workers = 1, .prefetch = 3});
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(static_cast<bool>(fast.next()));
  EXPECT_LT(fast.lastWaitSeconds(), 0.1);
}

TEST(Loader, RefusesBadOptions) {
  const Dataset data = numbered(10);
  EXPECT_THROW(Loader(data, Batches{{0}}, {.workers = -1}), InvalidArgument);
  EXPECT_THROW(Loader(data, Batches{{0}}, {.prefetch = 0}), InvalidArgument);
  Dataset mismatched = data;
  mismatched.labels = mismatched.labels.slice(0, 0, 5);
  EXPECT_THROW(Loader(mismatched, Batches{{0}}), InvalidArgument);
  if (!::torch::cuda::is_available()) {
    EXPECT_THROW(Loader(data, Batches{{0}}, {.pin = true}), InvalidArgument);
  }
}

}  // namespace
}  // namespace gyre::data
