// gyre::elastic: the membership protocol, State's commit/restore/sync, and run() surviving a lost
// worker and admitting a new one. Workers are threads; the test plays the launcher, publishing
// memberships in an in-memory store as `gyre run --elastic` does in its TCP store.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "elastic/membership.h"
#include "gyre/elastic.h"
#include "support/ranks.h"

namespace gyre::elastic {
namespace {

using namespace std::chrono_literals;

Options optionsFor(const std::shared_ptr<Store>& store, int id, std::chrono::milliseconds timeout = 20s) {
  Options o;
  o.store = store;
  o.workerId = id;
  o.host = "test";
  o.timeout = timeout;
  o.communicator.timeout = 20s;
  o.communicator.startTimeout = 10s;
  o.communicator.transport = Transport::kTcp;
  return o;
}

// Waits (bounded) until every id has announced itself ready, as the launcher does before
// admitting workers.
void waitReady(Store& store, const std::vector<int>& ids) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  for (const int id : ids)
    while (!isReady(store, id)) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "worker " << id << " never became ready";
      std::this_thread::sleep_for(5ms);
    }
}

TEST(ElasticMembership, FormatsParsesAndOrdersMembers) {
  EXPECT_EQ(formatMembers({0, 2, 5}), "0,2,5");
  EXPECT_EQ(parseMembers("0,2,5"), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(parseMembers(""), std::vector<int>{});
  EXPECT_THROW(parseMembers("0,,1"), ProtocolError);
  EXPECT_THROW(parseMembers("0,-1"), ProtocolError);
  EXPECT_THROW(parseMembers("a"), ProtocolError);
  // Survivors keep their order; newcomers follow by id, up to the cap.
  EXPECT_EQ(nextMembers({3, 0, 1}, {0}, {7, 4}, 8), (std::vector<int>{3, 1, 4, 7}));
  EXPECT_EQ(nextMembers({3, 0, 1}, {}, {7, 4, 3}, 4), (std::vector<int>{3, 0, 1, 4}));
  EXPECT_EQ(Membership({2, {5, 1}}).rankOf(1), 1);
  EXPECT_EQ(Membership({2, {5, 1}}).rankOf(4), -1);
}

TEST(ElasticMembership, PublishesTheNewest) {
  auto store = createMemoryStore();
  EXPECT_EQ(latestEpoch(*store), 0);
  EXPECT_FALSE(latestMembership(*store).has_value());
  publishMembership(*store, {1, {0, 1}});
  publishMembership(*store, {2, {1}});
  const auto m = latestMembership(*store);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->epoch, 2);
  EXPECT_EQ(m->members, std::vector<int>{1});
  EXPECT_THROW(publishMembership(*store, {0, {1}}), InvalidArgument);
}

TEST(ElasticMembership, WorkersRecordWhereTheyAreAndWhyTheyLeft) {
  auto store = createMemoryStore();
  EXPECT_FALSE(placeOf(*store, 3).has_value());
  EXPECT_EQ(placeEvents(*store), 0);
  recordPlace(*store, 3, {Place::Kind::kWaiting, 2, 1500, "timed out: waiting for rank 1 (host h)"});
  auto place = placeOf(*store, 3);
  ASSERT_TRUE(place.has_value());
  EXPECT_EQ(place->kind, Place::Kind::kWaiting);
  EXPECT_EQ(place->epoch, 2);
  EXPECT_EQ(place->timeoutMs, 1500);
  EXPECT_EQ(place->reason, "timed out: waiting for rank 1 (host h)");
  recordPlace(*store, 3, {Place::Kind::kArrived, 3, 1500, {}});
  place = placeOf(*store, 3);
  EXPECT_EQ(place->kind, Place::Kind::kArrived);
  EXPECT_EQ(place->epoch, 3);
  EXPECT_EQ(place->reason, "");
  EXPECT_EQ(placeEvents(*store), 2);
  for (const char* bad : {"", "arrived", "arrived 3", "left 3 10", "arrived -3 10", "arrived 3 x"}) {
    store->setString("elastic/place/4", bad);
    EXPECT_THROW(placeOf(*store, 4), ProtocolError) << bad;
  }
}

TEST(ElasticRendezvous, MembersGetTheirRanksInMembershipOrder) {
  auto store = createMemoryStore();
  publishMembership(*store, {1, {2, 0, 1}});
  test::runThreads(3, [&](int id) {
    Rendezvous r(optionsFor(store, id));
    auto comm = r.join();
    EXPECT_EQ(comm->size(), 3);
    EXPECT_EQ(comm->rank(), id == 2 ? 0 : id + 1);
    EXPECT_EQ(r.epoch(), 1);
    int value = 1;
    comm->allreduce(&value, &value, 1, {DataType::kInt32});
    EXPECT_EQ(value, 3);
    EXPECT_FALSE(r.membershipChanged(*comm));
  });
}

TEST(ElasticRendezvous, AMembershipThatAMemberNeverReachesIsAbandonedForTheNext) {
  auto store = createMemoryStore();
  publishMembership(*store, {1, {0, 1, 2}});  // worker 2 never comes
  auto launcher = test::spawn([&] {
    waitReady(*store, {0, 1});
    std::this_thread::sleep_for(50ms);
    publishMembership(*store, {2, {0, 1}});
  });
  test::runThreads(2, [&](int id) {
    Rendezvous r(optionsFor(store, id));
    auto comm = r.join();
    EXPECT_EQ(r.epoch(), 2);
    EXPECT_EQ(comm->size(), 2);
    EXPECT_EQ(comm->rank(), id);
  });
}

TEST(ElasticRendezvous, FailsWithTheLaunchersReasonOrAfterItsTimeout) {
  auto store = createMemoryStore();
  publishFailure(*store, "only 1 worker(s) left, below --min-np 2");
  Rendezvous gaveUp(optionsFor(store, 0));
  try {
    gaveUp.join();
    ADD_FAILURE() << "join() returned";
  } catch (const TimeoutError&) {
    ADD_FAILURE() << "a time-out instead of the launcher's reason";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("below --min-np 2"), std::string::npos) << e.what();
  }
  auto empty = createMemoryStore();
  publishMembership(*empty, {1, {1}});  // worker 0 is never admitted
  Rendezvous notAdmitted(optionsFor(empty, 0, 200ms));
  EXPECT_THROW(notAdmitted.join(), TimeoutError);
}

// A counter trained one step at a time: every step allreduces each rank's contribution, so the
// state after step s is a function of s alone, whatever the world.
struct Counter : State {
  Counter() {
    values["step"] = 0;
    reals["sum"] = 0;
  }
};

// Runs `steps` steps under elastic::run, committing every `every` steps. Returns after the last.
// `afterStep` runs after each step (before the commit), with the communicator.
void trainCounter(Counter& state, const Options& options, std::int64_t steps, std::int64_t every,
                  const std::function<void(Communicator&, std::int64_t)>& afterStep = {}) {
  run(
      state,
      [&](const std::shared_ptr<Communicator>& comm) {
        while (state.values["step"] < steps) {
          double one = 1.0 / comm->size();
          comm->allreduce(&one, &one, 1, {DataType::kFloat64});
          state.reals["sum"] += one;
          const std::int64_t step = ++state.values["step"];
          if (afterStep) afterStep(*comm, step);
          if (step % every == 0) state.commit();
        }
      },
      options);
}

TEST(ElasticRun, SurvivorsRollBackToTheirLastCommitAndFinishWithoutTheLostWorker) {
  auto store = createMemoryStore();
  publishMembership(*store, {1, {0, 1, 2}});
  std::atomic<int> resets{0};
  std::atomic<std::int64_t> redone{0};
  struct Died {};
  test::runThreads(3, [&](int id) {
    Counter state;
    state.onReset([&](Communicator&) { ++resets; });
    std::int64_t highest = 0;
    try {
      trainCounter(state, optionsFor(store, id), 40, 5, [&](Communicator&, std::int64_t step) {
        if (id == 2 && step == 13) throw Died{};  // its communicator closes, as a killed process's would
        if (step <= highest) ++redone;
        highest = std::max(highest, step);
      });
    } catch (const Died&) {
      publishMembership(*store, {2, {0, 1}});  // the launcher saw it go
      return;
    }
    EXPECT_EQ(state.values["step"], 40);
    EXPECT_DOUBLE_EQ(state.reals["sum"], 40.0);  // every step added exactly 1, before and after
    EXPECT_EQ(state.commits(), 8);
  });
  // Where each said it was last: the survivors in epoch 2, the lost worker still in epoch 1.
  EXPECT_EQ(placeOf(*store, 0)->epoch, 2);
  EXPECT_EQ(placeOf(*store, 1)->kind, Place::Kind::kArrived);
  EXPECT_EQ(placeOf(*store, 2)->epoch, 1);
  EXPECT_EQ(resets.load(), 3 + 2);  // the first membership, then the survivors' second
  // Each survivor lost the steps since commit 10 (11..13 at most): the work lost per failure is
  // bounded by the commit interval.
  EXPECT_GT(redone.load(), 0);
  EXPECT_LE(redone.load(), 2 * 5);
}

TEST(ElasticRun, ANewWorkerJoinsAtTheNextCommitAndReceivesTheState) {
  auto store = createMemoryStore();
  publishMembership(*store, {1, {0, 1}});
  std::atomic<bool> admitted{false};
  std::atomic<int> sizeAtEnd[3] = {0, 0, 0};
  auto launcher = test::spawn([&] {
    waitReady(*store, {2});
    publishMembership(*store, {2, nextMembers({0, 1}, {}, {2}, 3)});
    admitted = true;
  });
  test::runThreads(3, [&](int id) {
    Counter state;
    std::int64_t firstStep = -1;
    if (id == 2) waitReady(*store, {0, 1});  // joins once the others are under way
    trainCounter(state, optionsFor(store, id), 400, 4, [&](Communicator& comm, std::int64_t step) {
      if (firstStep < 0) firstStep = step;
      sizeAtEnd[id] = comm.size();
      // The first two do not finish before the newcomer is admitted (the launcher's publish).
      if (id != 2 && step == 300) {
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (!admitted && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      }
    });
    EXPECT_EQ(state.values["step"], 400);
    EXPECT_DOUBLE_EQ(state.reals["sum"], 400.0);
    if (id == 2) {
      EXPECT_GT(firstStep, 1) << "the newcomer started from the members' state";
    }
  });
  launcher.join();
  EXPECT_TRUE(admitted.load());
  for (const auto& s : sizeAtEnd) EXPECT_EQ(s.load(), 3);
}

TEST(ElasticState, SyncTakesTheMostAdvancedCommitAndRestoreGoesBackToIt) {
  auto store = createMemoryStore();
  test::runThreads(3, [&](int rank) {
    auto comm = Communicator::create(store, rank, 3, optionsFor(store, rank).communicator);
    Counter state;
    state.values["step"] = 10 * rank;
    for (int i = 0; i < (rank == 1 ? 2 : rank == 2 ? 1 : 0); ++i) state.commit();  // rank 1 has most
    state.values["step"] = 99;  // uncommitted
    state.sync(*comm);
    EXPECT_EQ(state.values["step"], 99) << "rank 1's current state, which it had not committed";
    EXPECT_EQ(state.commits(), 2);
    state.values["step"] = 5;
    state.restore();
    EXPECT_EQ(state.values["step"], 99);
  });
}

}  // namespace
}  // namespace gyre::elastic
