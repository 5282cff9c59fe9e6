// The decisions of `gyre run --elastic` (launcher/elastic_policy.h), driven with made-up events
// and times: first membership, a death and the next membership, below --min-np (wait, recover,
// give up), the replacement budget, the --max-np cap, the order of newcomers, the finish, and
// hosts that a discovery script adds and removes; then the discovery script's parser and its
// bounded runs (launcher/elastic_discovery.h).
#include "launcher/elastic_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "launcher/elastic_discovery.h"

namespace gyre::launcher {
namespace {

using Kind = ElasticAction::Kind;
using Time = ElasticPolicy::Time;

const Time t0 = Time() + std::chrono::hours(1);

Time at(double seconds) {
  return t0 + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

ElasticLimits limits(int np, int minNp, int maxNp, int replacements = 0, bool discovery = false) {
  ElasticLimits l;
  l.np = np;
  l.minNp = minNp;
  l.maxNp = maxNp;
  l.maxReplacements = replacements;
  l.discovery = discovery;
  l.startTimeout = std::chrono::seconds(30);
  l.elasticTimeout = std::chrono::seconds(5);
  return l;
}

WorkerEnd killed() {
  return WorkerEnd{false, "was killed by SIGKILL (Killed) after 1.0 s", 137, true};
}

WorkerEnd exitedWith(int code) {
  return WorkerEnd{code == 0, "exited with code " + std::to_string(code) + " after 1.0 s", code, false};
}

// What a batch of actions did, by kind.
struct Taken {
  std::vector<std::pair<int, std::string>> starts;  // id, host
  std::vector<int> stops;
  std::vector<elastic::Membership> published;
  std::vector<std::string> notes;
  std::vector<std::string> fails;
  int startSlots = 0;  // hostSlots of the last start
};

Taken take(ElasticPolicy& p) {
  Taken t;
  for (const ElasticAction& a : p.takeActions()) {
    switch (a.kind) {
      case Kind::kStart:
        t.starts.emplace_back(a.id, a.host);
        t.startSlots = a.hostSlots;
        break;
      case Kind::kStop:
        t.stops.push_back(a.id);
        break;
      case Kind::kPublish:
        t.published.push_back(a.membership);
        break;
      case Kind::kNote:
        t.notes.push_back(a.text);
        break;
      case Kind::kFail:
        t.fails.push_back(a.text);
        break;
    }
  }
  return t;
}

using Ids = std::vector<int>;

// A policy whose first np workers were started, became ready and form epoch 1.
ElasticPolicy running(ElasticLimits l, std::vector<HostSlots> hosts = {{"h", 8}}) {
  ElasticPolicy p(l, std::move(hosts), t0);
  for (int id = 0; id < l.np; ++id) p.ready(id, at(1));
  const Taken t = take(p);
  EXPECT_EQ(t.published.size(), 1u);
  return p;
}

TEST(ElasticPolicy, StartsTheFirstWorkersOnTheFirstFreeSlotsInHostOrder) {
  ElasticPolicy p(limits(3, 1, 4), {{"a", 2}, {"b", 2}}, t0);
  const Taken t = take(p);
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{0, "a"}, {1, "a"}, {2, "b"}}));
  EXPECT_EQ(t.startSlots, 2);
  EXPECT_TRUE(t.notes.empty());  // the first workers are not announced
  EXPECT_EQ(p.waitingIds(), (Ids{0, 1, 2}));
  EXPECT_THROW(ElasticPolicy(limits(3, 1, 4), {{"a", 2}}, t0), InvalidArgument);  // too few slots
  EXPECT_THROW(ElasticPolicy(limits(1, 2, 4), {{"a", 2}}, t0), InvalidArgument);  // np below min
}

TEST(ElasticPolicy, PublishesTheFirstMembershipOnceEveryWorkerIsReady) {
  ElasticPolicy p(limits(2, 1, 2), {{"h", 2}}, t0);
  take(p);
  p.ready(1, at(1));
  EXPECT_TRUE(take(p).published.empty());
  EXPECT_EQ(p.waitingIds(), (Ids{0}));
  p.ready(1, at(1.5));  // a repeat changes nothing
  p.ready(0, at(2));
  const Taken t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 1);
  EXPECT_EQ(t.published[0].members, (Ids{0, 1}));
  EXPECT_EQ(t.notes, std::vector<std::string>{"elastic epoch 1: workers 0, 1"});
  EXPECT_TRUE(p.waitingIds().empty());
}

TEST(ElasticPolicy, AtTheStartTimeOutTheReadyOnesFormTheFirstMembershipAndLateOnesJoinLater) {
  ElasticPolicy p(limits(3, 2, 3), {{"h", 3}}, t0);
  take(p);
  p.ready(2, at(1));
  p.ready(0, at(2));
  p.tick(at(29.9));
  EXPECT_TRUE(take(p).published.empty());
  p.tick(at(30));
  Taken t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2}));
  p.ready(1, at(31));
  t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 2);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2, 1}));  // the newcomer after the survivors
}

TEST(ElasticPolicy, TooFewReadyAtTheStartTimeOutGivesUp) {
  ElasticPolicy p(limits(3, 3, 3), {{"h", 3}}, t0);
  take(p);
  p.ready(0, at(1));
  p.tick(at(30));
  const Taken t = take(p);
  EXPECT_TRUE(t.published.empty());
  const std::string reason =
      "only 1 of 3 workers ready to join within --start-timeout 30 s, below --min-np 3; stopping";
  EXPECT_EQ(t.fails, std::vector<std::string>{reason});
  EXPECT_EQ(t.notes, std::vector<std::string>{reason});
  ASSERT_EQ(p.outcome().fatal.size(), 1u);
  EXPECT_EQ(p.outcome().fatal[0].rank, -1);
  EXPECT_EQ(p.outcome().fatal[0].exitCode, 1);
  EXPECT_FALSE(p.over());  // its workers still run until the supervisor has stopped them
  for (int id = 0; id < 3; ++id) p.exited(id, killed(), at(31));
  EXPECT_TRUE(p.over());
  EXPECT_TRUE(take(p).fails.empty());
  EXPECT_TRUE(p.outcome().tolerated.empty());  // exits after giving up are not failures
}

TEST(ElasticPolicy, ADeadMemberLeavesTheNextMembershipAtOnce) {
  ElasticPolicy p = running(limits(3, 1, 3));
  p.exited(1, killed(), at(5));
  const Taken t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 2);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2}));
  ASSERT_GE(t.notes.size(), 1u);
  EXPECT_EQ(t.notes[0],
            "worker 1 on host h was killed by SIGKILL (Killed) after 1.0 s; continuing with 2 workers "
            "(elastic: --min-np 1)");
  EXPECT_TRUE(t.starts.empty());  // no replacements allowed
  ASSERT_EQ(p.outcome().tolerated.size(), 1u);
  EXPECT_EQ(p.outcome().tolerated[0].rank, 1);
  p.exited(1, killed(), at(6));  // a repeat changes nothing
  EXPECT_TRUE(take(p).published.empty());
  EXPECT_EQ(p.outcome().tolerated.size(), 1u);
}

TEST(ElasticPolicy, AWorkerThatDiesBeforeJoiningJustDisappears) {
  ElasticPolicy p(limits(2, 1, 2), {{"h", 2}}, t0);
  take(p);
  p.ready(0, at(1));
  p.exited(1, exitedWith(3), at(2));
  const Taken t = take(p);
  ASSERT_EQ(t.published.size(), 1u);  // every worker still there is ready
  EXPECT_EQ(t.published[0].members, (Ids{0}));
  EXPECT_EQ(p.outcome().tolerated.size(), 1u);
}

TEST(ElasticPolicy, BelowMinNpPublishesNothingAndGivesUpAfterTheElasticTimeOut) {
  ElasticPolicy p = running(limits(2, 2, 2));
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  EXPECT_TRUE(t.published.empty());
  EXPECT_EQ(t.notes,
            std::vector<std::string>{
                "worker 1 on host h was killed by SIGKILL (Killed) after 1.0 s; 1 worker left, below "
                "--min-np 2: waiting up to 5.0 s (--elastic-timeout) for more"});
  p.tick(at(14.9));
  EXPECT_TRUE(take(p).fails.empty());
  p.tick(at(15));
  t = take(p);
  const std::string reason =
      "only 1 worker(s) left, below --min-np 2, for 5.0 s (--elastic-timeout); stopping";
  EXPECT_EQ(t.fails, std::vector<std::string>{reason});
  EXPECT_EQ(t.notes, std::vector<std::string>{reason});
  EXPECT_EQ(p.outcome().fatal.at(0).message, reason);
  EXPECT_EQ(p.outcome().headline, "the job stayed below --min-np 2");
  EXPECT_EQ(p.outcome().story.front(), "elastic epoch 1: workers 0, 1");
  p.tick(at(100));
  EXPECT_TRUE(take(p).fails.empty());  // once
}

TEST(ElasticPolicy, AReplacementBringsTheJobBackAboveMinNp) {
  ElasticPolicy p = running(limits(2, 2, 2, 1), {{"a", 1}, {"b", 1}});
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  EXPECT_TRUE(t.published.empty());
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{2, "b"}}));  // the slot the dead one left
  EXPECT_NE(
      std::find(t.notes.begin(), t.notes.end(),
                "starting worker 2 on host b to replace a lost one (replacement 1 of 1, --max-restarts)"),
      t.notes.end());
  p.tick(at(14));
  p.ready(2, at(14));
  t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 2);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2}));
  p.tick(at(100));  // the below-min-np clock was reset
  EXPECT_TRUE(take(p).fails.empty());
}

TEST(ElasticPolicy, TheReplacementBudgetCoversTheWholeJob) {
  ElasticPolicy p = running(limits(2, 1, 2, 1));
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  EXPECT_EQ(t.starts.size(), 1u);
  p.ready(2, at(11));
  EXPECT_EQ(take(p).published.at(0).members, (Ids{0, 2}));
  p.exited(2, exitedWith(4), at(12));
  t = take(p);
  EXPECT_TRUE(t.starts.empty());  // the one replacement is used
  EXPECT_EQ(t.published.at(0).members, (Ids{0}));
  EXPECT_EQ(p.outcome().replacements, 1);
  EXPECT_EQ(p.outcome().tolerated.size(), 2u);
}

TEST(ElasticPolicy, WithoutWorkersOrReplacementsTheJobIsLost) {
  ElasticPolicy p = running(limits(2, 1, 2, 1));
  p.exited(0, exitedWith(3), at(10));
  take(p);
  p.exited(1, killed(), at(11));  // worker 2, the replacement, is still starting
  EXPECT_TRUE(take(p).fails.empty());
  p.exited(2, exitedWith(127), at(12));
  const Taken t = take(p);
  EXPECT_EQ(t.fails, std::vector<std::string>{"every worker is lost"});
  EXPECT_TRUE(t.notes.empty());  // the final report names the cause, with its output
  ASSERT_EQ(p.outcome().fatal.size(), 1u);
  EXPECT_EQ(p.outcome().fatal[0].rank, 2);  // the last failure is the cause, with its code
  EXPECT_EQ(p.outcome().fatal[0].exitCode, 127);
  EXPECT_EQ(p.outcome().headline,
            "every worker is lost and none can be started (1 replacement(s) of --max-restarts 1 used)");
  EXPECT_TRUE(p.over());
}

TEST(ElasticPolicy, NewcomersJoinAfterTheSurvivorsInIdOrder) {
  ElasticPolicy p = running(limits(3, 3, 3, 2));
  p.exited(0, killed(), at(10));
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{3, "h"}, {4, "h"}}));
  EXPECT_TRUE(t.published.empty());
  p.ready(4, at(11));
  EXPECT_TRUE(take(p).published.empty());  // 2 and 4: still below --min-np 3
  p.ready(3, at(12));
  t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 2);
  EXPECT_EQ(t.published[0].members, (Ids{2, 3, 4}));
}

TEST(ElasticPolicy, MaxNpCapsTheWorkersAndTheMembership) {
  ElasticPolicy p = running(limits(2, 1, 3, 0, true), {{"a", 2}});
  p.discovered({{"a", 2}, {"b", 4}}, at(5));
  Taken t = take(p);
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{2, "b"}}));  // 3 at most
  EXPECT_EQ(t.startSlots, 4);
  EXPECT_EQ(t.notes, std::vector<std::string>{"starting worker 2 on host b (a discovered slot)"});
  p.ready(2, at(6));
  EXPECT_EQ(take(p).published.at(0).members, (Ids{0, 1, 2}));
  EXPECT_EQ(p.outcome().replacements, 0);  // growth is not a replacement
}

TEST(ElasticPolicy, SlotsBeyondMaxNpStartNothing) {
  // A discovered slot beyond --max-np starts nothing, and without replacements a loss is not
  // made up from it either.
  ElasticPolicy p = running(limits(2, 1, 2, 0, true), {{"a", 2}});
  p.discovered({{"a", 3}}, at(5));
  EXPECT_TRUE(take(p).starts.empty());  // --max-np 2 already
  p.exited(1, killed(), at(6));
  Taken t = take(p);
  EXPECT_EQ(t.published.at(0).members, (Ids{0}));
  EXPECT_TRUE(t.starts.empty());  // no replacements: --max-restarts 0
}

TEST(ElasticPolicy, TheFinishStopsPublishingStartingAndTheWorkersThatAreNotMembers) {
  ElasticPolicy p = running(limits(2, 1, 2, 2));
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  EXPECT_EQ(t.starts.size(), 1u);  // worker 2, not ready yet
  p.exited(0, exitedWith(0), at(11));
  t = take(p);
  EXPECT_EQ(t.stops, (Ids{2}));
  EXPECT_TRUE(t.published.empty());
  EXPECT_TRUE(t.starts.empty());
  EXPECT_EQ(t.notes,
            std::vector<std::string>{
                "worker 0 finished: the job is finishing; stopping the workers that are not members: 2"});
  p.ready(2, at(11.5));
  p.exited(2, WorkerEnd{false, "was killed by SIGTERM (Terminated) after 1.0 s", 143, true}, at(12));
  t = take(p);
  EXPECT_TRUE(t.published.empty());
  EXPECT_TRUE(t.fails.empty());
  EXPECT_TRUE(t.starts.empty());
  EXPECT_TRUE(p.over());
  EXPECT_TRUE(p.outcome().finished);
  EXPECT_EQ(p.outcome().tolerated.size(), 1u);
  EXPECT_TRUE(p.outcome().fatal.empty());
}

// A replacement was published into membership 3, but the members finished before they reached
// its rendezvous: it would wait for them until the elastic time-out, so the finish stops it.
TEST(ElasticPolicy, TheFinishStopsANewcomerOfAMembershipThatNeverFormed) {
  ElasticPolicy p = running(limits(2, 1, 2, 2));
  p.exited(1, killed(), at(10));
  Taken t = take(p);
  ASSERT_EQ(t.starts.size(), 1u);  // worker 2
  p.ready(2, at(11));
  t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2}));
  p.formed(elastic::Membership{2, {0}});  // the supervisor read it: {0, 2} never formed
  p.exited(0, exitedWith(0), at(12));
  t = take(p);
  EXPECT_EQ(t.stops, (Ids{2}));
  EXPECT_TRUE(p.outcome().finished);
}

TEST(ElasticPolicy, AFailureAfterTheFinishBeganEndsTheJobWithIt) {
  ElasticPolicy p = running(limits(3, 1, 3, 1));
  p.exited(0, exitedWith(0), at(10));
  take(p);
  p.exited(1, exitedWith(3), at(11));
  const Taken t = take(p);
  EXPECT_TRUE(t.published.empty());
  EXPECT_TRUE(t.starts.empty());
  EXPECT_EQ(t.fails.size(), 1u);
  ASSERT_EQ(p.outcome().fatal.size(), 1u);
  EXPECT_EQ(p.outcome().fatal[0].rank, 1);
  EXPECT_EQ(p.outcome().fatal[0].exitCode, 3);
  EXPECT_EQ(p.outcome().headline, "worker 1 failed after the job began to finish");
  EXPECT_FALSE(p.outcome().finished);
}

TEST(ElasticPolicy, AHostThatLeavesHasItsWorkersStoppedWithoutCountingFailures) {
  ElasticPolicy p = running(limits(3, 1, 3, 0, true), {{"a", 1}, {"b", 2}});
  p.discovered({{"a", 1}}, at(5));
  Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{2, 1}));  // the newest first
  EXPECT_NE(
      std::find(t.notes.begin(), t.notes.end(), "host b is no longer discovered; stopping worker(s) 1, 2"),
      t.notes.end());
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{0}));
  p.exited(1, WorkerEnd{false, "was killed by SIGTERM (Terminated) after 5.0 s", 143, true}, at(6));
  p.exited(2, exitedWith(1), at(6));
  t = take(p);
  EXPECT_TRUE(t.published.empty());
  EXPECT_TRUE(p.outcome().tolerated.empty());
  // It comes back: new workers start there, and they are not replacements.
  p.discovered({{"a", 1}, {"b", 2}}, at(7));
  t = take(p);
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{3, "b"}, {4, "b"}}));
  EXPECT_EQ(p.outcome().replacements, 0);
}

TEST(ElasticPolicy, FewerSlotsOnAHostStopTheNewestWorkersThere) {
  ElasticPolicy p = running(limits(3, 1, 3, 0, true), {{"a", 3}});
  p.discovered({{"a", 1}}, at(5));
  const Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{2, 1}));
  EXPECT_NE(std::find(t.notes.begin(), t.notes.end(), "host a has 1 slot(s) now; stopping worker(s) 1, 2"),
            t.notes.end());
  EXPECT_EQ(t.published.at(0).members, (Ids{0}));
}

TEST(ElasticPolicy, WithDiscoveryNoWorkersLeftWaitsForHostsUpToTheElasticTimeOut) {
  ElasticPolicy p = running(limits(1, 1, 2, 0, true), {{"a", 1}});
  p.discovered({}, at(5));
  Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{0}));
  p.exited(0, killed(), at(6));
  p.tick(at(9));
  EXPECT_TRUE(take(p).fails.empty());  // a host may come back
  p.discovered({{"b", 1}}, at(9.5));
  t = take(p);
  EXPECT_EQ(t.starts, (std::vector<std::pair<int, std::string>>{{1, "b"}}));
  p.ready(1, at(9.8));
  t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{1}));
  p.tick(at(100));
  EXPECT_TRUE(take(p).fails.empty());
}

elastic::Place arrived(std::int64_t epoch) {
  return {elastic::Place::Kind::kArrived, epoch, 1000, {}};
}

elastic::Place waiting(std::int64_t left, std::string why = {}) {
  return {elastic::Place::Kind::kWaiting, left, 1000, std::move(why)};
}

// Three members training in epoch 1 (formed), whose communicators time out after 1 s: the grace
// is 1 + 2 s.
ElasticPolicy trainingInEpochOne() {
  ElasticPolicy p = running(limits(3, 1, 3));
  p.formed(elastic::Membership{1, {0, 1, 2}});
  for (int id = 0; id < 3; ++id) p.placed(id, arrived(1), at(2));
  EXPECT_TRUE(take(p).stops.empty());
  return p;
}

TEST(ElasticPolicy, AMemberStillInAMembershipTheOthersLeftIsStoppedAsFailedAfterTheGrace) {
  ElasticPolicy p = trainingInEpochOne();
  p.placed(0, waiting(1, "timed out: waiting for rank 1"), at(10));
  p.placed(2, waiting(1, "timed out: waiting for rank 1"), at(10.4));
  p.placed(2, waiting(1, "timed out: waiting for rank 1"), at(11));  // a repeat: still since 10.4
  p.tick(at(12.9));
  EXPECT_TRUE(take(p).stops.empty());
  p.tick(at(13));
  const Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{1}));
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{0, 2}));
  ASSERT_GE(t.notes.size(), 1u);
  EXPECT_EQ(
      t.notes[0],
      "worker 1 on host h stopped answering: worker 0 left membership 1 3.0 s ago (timed out: waiting "
      "for rank 1) and it is still in it; stopping it; continuing with 2 workers (elastic: --min-np 1)");
  ASSERT_EQ(p.outcome().tolerated.size(), 1u);
  EXPECT_EQ(p.outcome().tolerated[0].rank, 1);
  p.exited(1, killed(), at(14));  // its end, once the stop killed it, is not a second failure
  EXPECT_TRUE(take(p).published.empty());
  EXPECT_EQ(p.outcome().tolerated.size(), 1u);
}

TEST(ElasticPolicy, MembersThatLeaveTogetherOrNeverLeaveAreNotStopped) {
  ElasticPolicy p = trainingInEpochOne();
  p.tick(at(100));  // training for long, nobody left: nothing to judge
  EXPECT_TRUE(take(p).stops.empty());
  for (int id = 0; id < 3; ++id) p.placed(id, waiting(1), at(101));  // a membership change, seen by all
  p.tick(at(200));
  EXPECT_TRUE(take(p).stops.empty());
  EXPECT_TRUE(p.outcome().tolerated.empty());

  // Workers that record no place (they do not use gyre::elastic) are never judged.
  ElasticPolicy silent = running(limits(2, 1, 2));
  silent.formed(elastic::Membership{1, {0, 1}});
  silent.tick(at(1000));
  EXPECT_TRUE(take(silent).stops.empty());
}

TEST(ElasticPolicy, AMemberThatDoesNotReachTheNextRendezvousIsStoppedAsFailedAfterTheGrace) {
  ElasticPolicy p = trainingInEpochOne();
  p.exited(2, killed(), at(5));
  ASSERT_EQ(take(p).published.size(), 1u);  // epoch 2: workers 0, 1
  p.placed(0, waiting(1, "lost a peer"), at(5.1));
  p.placed(1, waiting(1, "lost a peer"), at(5.2));
  p.placed(0, arrived(2), at(5.3));
  p.tick(at(8.1));
  EXPECT_TRUE(take(p).stops.empty());
  p.tick(at(8.2));  // 3 s after worker 1 said it waits, epoch 2 holding it
  const Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{1}));
  ASSERT_GE(t.notes.size(), 1u);
  EXPECT_EQ(
      t.notes[0],
      "worker 1 on host h stopped answering: it did not reach the rendezvous of membership 2 within 3.0 s; "
      "stopping it; continuing with 1 worker (elastic: --min-np 1)");
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].members, (Ids{0}));
}

// A newer membership is already published when a member stops (here: another member died, and
// the stopped one had not left yet): the others time out and go straight on to the newer
// rendezvous, so the launcher may see only their arrival there. That is leaving the formed
// membership too, and the stopped member, still in it, is stopped after the grace.
TEST(ElasticPolicy, AMemberStoppedWhileANewerMembershipWaitsIsStoppedToo) {
  ElasticPolicy p = trainingInEpochOne();
  p.exited(2, killed(), at(4));
  ASSERT_EQ(take(p).published.size(), 1u);  // epoch 2: workers 0, 1
  // Worker 1 stops; worker 0 times out and is seen only as arrived at epoch 2.
  p.placed(0, arrived(2), at(10));
  p.tick(at(12.9));
  EXPECT_TRUE(take(p).stops.empty());
  p.tick(at(13));
  const Taken t = take(p);
  EXPECT_EQ(t.stops, (Ids{1}));
  ASSERT_GE(t.notes.size(), 1u);
  EXPECT_EQ(
      t.notes[0],
      "worker 1 on host h stopped answering: worker 0 left membership 1 3.0 s ago and it is still in it; "
      "stopping it; continuing with 1 worker (elastic: --min-np 1)");
}

TEST(ElasticPolicy, MembersStillTrainingWhileANewcomerWaitsForThemAreNotStopped) {
  ElasticLimits l = limits(2, 1, 3);
  ElasticPolicy p(l, {{"h", 3}}, t0);
  p.ready(0, at(1));
  p.ready(1, at(1));
  p.formed(elastic::Membership{1, {0, 1}});
  p.placed(0, arrived(1), at(2));
  p.placed(1, arrived(1), at(2));
  take(p);
  p.discovered({{"h", 3}}, at(3));  // no change
  // A third worker (started by a grown host list) is admitted: epoch 2 waits for the members'
  // next commit, which may be long.
  p.discovered({{"h", 3}, {"g", 1}}, at(4));
  Taken t = take(p);
  ASSERT_EQ(t.starts.size(), 1u);
  const int newcomer = t.starts[0].first;
  p.ready(newcomer, at(5));
  p.placed(newcomer, waiting(0), at(5));
  ASSERT_EQ(take(p).published.size(), 1u);
  p.placed(newcomer, arrived(2), at(5.1));
  p.tick(at(60));
  EXPECT_TRUE(take(p).stops.empty());
}

TEST(ElasticPolicy, WhenTheSupervisorStopsNothingMoreHappens) {
  ElasticPolicy p = running(limits(2, 1, 2, 2));
  p.stopping();
  p.exited(0, killed(), at(10));
  p.exited(1, killed(), at(10));
  const Taken t = take(p);
  EXPECT_TRUE(t.starts.empty());
  EXPECT_TRUE(t.published.empty());
  EXPECT_TRUE(t.fails.empty());
  EXPECT_TRUE(p.outcome().tolerated.empty());
  EXPECT_TRUE(p.over());
  EXPECT_FALSE(p.outcome().finished);
}

TEST(HostDiscovery, ParsesHostsAndSlotsAndNothingAsNoHosts) {
  const auto hosts = parseDiscoveredHosts("# now\nnode1:2\nnode2\nnode3 slots=3\n");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_TRUE(parseDiscoveredHosts("").empty());
  EXPECT_TRUE(parseDiscoveredHosts("# none\n\n").empty());
  EXPECT_THROW(parseDiscoveredHosts("a:2\na:1\n"), InvalidArgument);
  EXPECT_THROW(parseDiscoveredHosts("a:x\n"), InvalidArgument);
}

TEST(HostDiscovery, RunsTheScriptBoundedAndSaysWhyARunFailed) {
  using std::chrono::milliseconds;
  HostDiscovery::Result r = HostDiscovery("printf 'a:2\\nb\\n'", milliseconds(10)).runNow();
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.hosts.size(), 2u);
  EXPECT_EQ(r.hosts[1].name, "b");
  r = HostDiscovery("echo 'no hosts today' >&2; exit 3", milliseconds(10)).runNow();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "exited with code 3: no hosts today");
  const auto began = std::chrono::steady_clock::now();
  r = HostDiscovery("sleep 30", milliseconds(10), milliseconds(200)).runNow();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "did not finish within 0.2 s");
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
  r = HostDiscovery("echo 'a:0'", milliseconds(10)).runNow();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("slots must be a positive integer"), std::string::npos) << r.error;
}

// gyre run --rdzv: a node that takes over the job goes on from what the previous leader left:
// the workers it started, the membership it published, its counts.
ElasticTakeover takeover() {
  ElasticTakeover t;
  t.workers = {{0, "a", false, true, false}, {1, "b", false, true, false}, {2, "b", true, true, false}};
  t.published = elastic::Membership{3, {0, 1}};
  t.formed = t.published;
  t.counters = ElasticCounters{1, 0, 0, 2};
  return t;
}

TEST(ElasticPolicyTakeover, DecidesNothingUntilToldAndGoesOnFromTheNewestMembership) {
  ElasticPolicy p(limits(2, 1, 2, /*replacements=*/2, /*discovery=*/true), {{"a", 1}, {"b", 1}}, takeover(),
                  t0);
  EXPECT_TRUE(take(p).notes.empty());
  p.tick(at(1));
  const Taken quiet = take(p);  // both members alive, the slots full: nothing to do
  EXPECT_TRUE(quiet.published.empty());
  EXPECT_TRUE(quiet.starts.empty());
  EXPECT_EQ(p.aliveCount(), 2);
  EXPECT_EQ(p.outcome().epochs, 3);
  EXPECT_EQ(p.counters().replacements, 1);
}

TEST(ElasticPolicyTakeover, TheWorkerLostWithTheOldLeaderLeavesTheNextMembershipAndIsReplaced) {
  ElasticPolicy p(limits(2, 1, 2, /*replacements=*/2, /*discovery=*/true), {{"a", 1}, {"b", 1}}, takeover(),
                  t0);
  // Node a (the old leader) is gone, with worker 0.
  p.hostsLost({"a"});
  p.exited(0, WorkerEnd{false, "was lost with node a (its etcd lease expired)", 1, false}, at(1));
  p.discovered({{"b", 1}}, at(1));
  const Taken t = take(p);
  ASSERT_EQ(t.published.size(), 1u);
  EXPECT_EQ(t.published[0].epoch, 4);
  EXPECT_EQ(t.published[0].members, (Ids{1}));
  EXPECT_TRUE(t.starts.empty());  // no free slot: node b's one slot holds worker 1
  // A node with a slot joins: the owed replacement starts there, with a fresh id.
  p.discovered({{"b", 1}, {"c", 1}}, at(2));
  const Taken later = take(p);
  ASSERT_EQ(later.starts.size(), 1u);
  EXPECT_EQ(later.starts[0], std::make_pair(3, std::string("c")));
  EXPECT_EQ(p.counters().replacements, 2);
}

}  // namespace
}  // namespace gyre::launcher
