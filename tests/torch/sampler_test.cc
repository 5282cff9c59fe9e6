// DistributedSampler: disjoint shards that cover the data, padding or dropping so every rank runs
// the same steps, one shuffled order per epoch shared by all ranks, and the property data-parallel
// training rests on: one rank with batch B trains, step by step, on exactly the samples that W
// ranks with batch B / W train on together.
#include "gyre/torch/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gyre/errors.h"

namespace gyre::torch {
namespace {

using Indices = std::vector<std::int64_t>;

std::vector<Indices> shards(std::int64_t n, int ranks, std::int64_t epoch,
                            DistributedSamplerOptions options = {}) {
  std::vector<Indices> out;
  for (int r = 0; r < ranks; ++r) {
    DistributedSampler sampler(n, ranks, r, options);
    sampler.setEpoch(epoch);
    out.push_back(sampler.indices());
  }
  return out;
}

Indices sorted(Indices v) {
  std::sort(v.begin(), v.end());
  return v;
}

Indices range(std::int64_t n) {
  Indices v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheData) {
  for (int ranks : {1, 2, 3, 4, 5}) {
    const std::int64_t n = 600;  // divisible by every world here
    Indices all;
    for (const Indices& shard : shards(n, ranks, 0)) {
      EXPECT_EQ(static_cast<std::int64_t>(shard.size()), n / ranks);
      all.insert(all.end(), shard.begin(), shard.end());
    }
    EXPECT_EQ(sorted(all), range(n)) << ranks << " ranks";
  }
}

TEST(DistributedSampler, PaddingRepeatsSamplesSoEveryRankGetsAsMany) {
  const std::vector<Indices> s = shards(10, 4, 0);
  Indices all;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s[r].size(), 3u) << "rank " << r;
    EXPECT_EQ(DistributedSampler(10, 4, r).samplesPerRank(), 3);
    all.insert(all.end(), s[r].begin(), s[r].end());
  }
  const std::set<std::int64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 10u);  // every sample, two of them twice
  for (std::int64_t i : all) EXPECT_TRUE(i >= 0 && i < 10) << i;
}

TEST(DistributedSampler, DroppingLeavesOutTheTail) {
  DistributedSamplerOptions o;
  o.dropLast = true;
  const std::vector<Indices> s = shards(10, 4, 0, o);
  Indices all;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s[r].size(), 2u) << "rank " << r;
    EXPECT_EQ(DistributedSampler(10, 4, r, o).samplesPerRank(), 2);
    all.insert(all.end(), s[r].begin(), s[r].end());
  }
  EXPECT_EQ(std::set<std::int64_t>(all.begin(), all.end()).size(), 8u);  // disjoint
}

TEST(DistributedSampler, EveryRankRunsTheSameSteps) {
  for (bool dropLast : {false, true}) {
    DistributedSamplerOptions o;
    o.dropLast = dropLast;
    for (int ranks : {2, 3, 7}) {
      const std::int64_t n = 1001;
      const DistributedSampler first(n, ranks, 0, o);
      for (int r = 1; r < ranks; ++r) {
        const DistributedSampler other(n, ranks, r, o);
        EXPECT_EQ(other.samplesPerRank(), first.samplesPerRank());
        EXPECT_EQ(other.steps(32), first.steps(32));
        EXPECT_EQ(other.steps(32, false), first.steps(32, false));
      }
    }
  }
}

TEST(DistributedSampler, StepsCountFullOrPartialBatches) {
  const DistributedSampler sampler(100, 4, 1);  // 25 samples per rank
  EXPECT_EQ(sampler.steps(10), 2);
  EXPECT_EQ(sampler.steps(10, false), 3);
  EXPECT_EQ(sampler.steps(25), 1);
  EXPECT_EQ(sampler.steps(26), 0);
}

TEST(DistributedSampler, ShuffleDiffersPerEpochButNotAcrossRanksOrProcesses) {
  const std::vector<Indices> epoch0 = shards(1000, 2, 0);
  const std::vector<Indices> epoch1 = shards(1000, 2, 1);
  EXPECT_NE(epoch0[0], epoch1[0]);
  EXPECT_NE(epoch0[1], epoch1[1]);
  // Another process building the same sampler gets the same order: nothing depends on state.
  EXPECT_EQ(shards(1000, 2, 0), epoch0);
  EXPECT_EQ(shards(1000, 2, 1), epoch1);
  // A shuffled order, not the identity.
  EXPECT_NE(shards(1000, 1, 0)[0], range(1000));
  // The seed changes the order.
  DistributedSamplerOptions seeded;
  seeded.seed = 7;
  EXPECT_NE(shards(1000, 2, 0, seeded), epoch0);
}

TEST(DistributedSampler, WithoutShuffleRanksTakeEveryWthSample) {
  DistributedSamplerOptions o;
  o.shuffle = false;
  const std::vector<Indices> s = shards(12, 3, 5, o);
  EXPECT_EQ(s[0], (Indices{0, 3, 6, 9}));
  EXPECT_EQ(s[1], (Indices{1, 4, 7, 10}));
  EXPECT_EQ(s[2], (Indices{2, 5, 8, 11}));
}

// What makes W workers with batch B / W compute what one worker with batch B computes.
TEST(DistributedSampler, OneRankBatchEqualsTheUnionOfWRanksBatchesAtEveryStep) {
  struct Case {
    std::int64_t n;
    std::int64_t batch;  // global
  };
  for (const Case c : {Case{1000, 40}, Case{60000, 128}}) {
    for (int ranks : {2, 4, 8}) {
      for (std::int64_t epoch : {0, 3}) {
        DistributedSampler one(c.n, 1, 0);
        one.setEpoch(epoch);
        const Indices single = one.indices();
        const std::vector<Indices> many = shards(c.n, ranks, epoch);
        const std::int64_t perRank = c.batch / ranks;
        const std::int64_t steps = one.steps(c.batch);
        ASSERT_EQ(DistributedSampler(c.n, ranks, 0).steps(perRank), steps);
        for (std::int64_t s = 0; s < steps; ++s) {
          Indices together;
          for (const Indices& shard : many)
            together.insert(together.end(), shard.begin() + s * perRank, shard.begin() + (s + 1) * perRank);
          const Indices alone(single.begin() + s * c.batch, single.begin() + (s + 1) * c.batch);
          ASSERT_EQ(sorted(together), sorted(alone)) << "n " << c.n << ", batch " << c.batch << ", " << ranks
                                                     << " ranks, epoch " << epoch << ", step " << s;
        }
      }
    }
  }
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgument);
  EXPECT_THROW(DistributedSampler(10, 2, -1), InvalidArgument);
  EXPECT_THROW(DistributedSampler(10, 0, 0), InvalidArgument);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), InvalidArgument);
  EXPECT_NO_THROW(DistributedSampler(0, 2, 1));
}

}  // namespace
}  // namespace gyre::torch
