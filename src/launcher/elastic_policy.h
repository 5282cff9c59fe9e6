// The decisions of an elastic `gyre run --elastic` job, without processes, stores or clocks of
// its own: which workers to start and where, which membership to publish, which workers to stop,
// and when to give up. The supervisor (elastic_job.h) tells it what happened, with the time, and
// carries out the actions it returns; the unit tests drive it with made-up events and times.
//
// The rules (docs/gyre-run.md, "Elastic jobs"):
// - Workers get ids 0, 1, ... in the order they are started; a replacement gets a fresh id.
// - The first membership (epoch 1) is published once every worker started so far is ready, or,
//   when the start time-out passes, with the ready ones if they are at least minNp (fewer: give
//   up). Workers that were not ready then join later, as newcomers.
// - Afterwards a new membership, nextMembers(current, gone, ready newcomers, maxNp), is published
//   whenever a member is gone (failed, or stopped because its host left) or a ready newcomer fits
//   (members < maxNp), provided it has at least minNp members. Below minNp nothing is published;
//   past the elastic time-out the policy gives up.
// - A failed worker is replaced while replacements are left (maxReplacements over the whole job);
//   without discovery the job keeps np workers, with it min(maxNp, discovered slots): new slots
//   start workers (not counted as replacements), a host that disappears has its workers stopped
//   (not failures). Workers go to the first host, in list order, with a free slot.
// - A worker that exits 0 starts the finish: nothing more is published or started, workers that
//   are not members (of the newest membership that formed, when the supervisor says which) are
//   stopped, and the job ends when every worker has exited. A failure after that ends the job
//   with that failure.
// - Without discovery, when no worker is left and none can be started, the job is lost.
// - A worker that stops answering (SIGSTOP, a hang in its own code, a machine that froze) is
//   found from the places the workers record (elastic::Place): once a member has said it left the
//   membership the workers train in, a member still in it after the grace, or a member of a newer
//   published membership that did not reach its rendezvous within the grace of its publication
//   (or of its own leaving), is stopped and counts as failed. The grace is the longest
//   communicator time-out the workers reported, plus half of it (at least 2 s): every member that
//   still calls collectives has timed out or lost a peer by then and said so.
//
// Not thread-safe; one supervisor thread owns it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "elastic/membership.h"
#include "launcher/failures.h"
#include "launcher/hosts.h"

namespace gyre::launcher {

struct ElasticLimits {
  int np = 1;  // workers started at first
  int minNp = 1;
  int maxNp = 1;
  int maxReplacements = 0;                           // --max-restarts: replacement workers over the whole job
  bool discovery = false;                            // hosts come from --host-discovery-script and may change
  std::chrono::milliseconds startTimeout{30000};     // for the first membership
  std::chrono::milliseconds elasticTimeout{600000};  // below minNp
};

struct ElasticAction {
  enum class Kind {
    kStart,    // start worker `id` on `host`, whose cores `hostSlots` workers share
    kStop,     // stop worker `id` (its host left, or the job is finishing); not a failure
    kPublish,  // publish `membership`
    kNote,     // print `text` (without "gyre run: ") on stderr
    kFail,     // give up: publish `text` as the job's failure and stop every worker
  };
  Kind kind = Kind::kNote;
  int id = -1;
  std::string host;
  int hostSlots = 0;
  elastic::Membership membership;
  std::string text;
};

// How a worker ended, as the supervisor describes it.
// What the job went through, for the final report.
struct ElasticOutcome {
  bool finished = false;           // a worker exited 0 and no failure came after
  std::vector<Failure> tolerated;  // failures the job went on past
  // What ended the job without success, the cause first; empty when it finished (or the
  // supervisor stopped it: an interrupt, --timeout).
  std::vector<Failure> fatal;
  std::string headline;            // why the job ended, when it did not finish
  std::vector<std::string> story;  // memberships, losses, starts, in order
  int epochs = 0;                  // memberships published
  int replacements = 0;            // replacement workers started
};

// The decisions a policy has counted, which a launcher taking over the job (gyre run --rdzv,
// rdzv_job.h) must go on from.
struct ElasticCounters {
  int replacements = 0;  // replacement workers started
  int owed = 0;          // replacements decided and not yet started
  int unreplaced = 0;    // failures without a replacement left
  int wanted = 0;        // workers the job should have
};

// What a launcher that takes over a running job reads of it from the job's store.
struct ElasticTakeover {
  struct Known {
    int id = 0;
    std::string host;
    bool exited = false;  // its end was counted by the leader before
    bool ready = false;
    bool stopped = false;  // the leader before asked it to stop: its end is not a failure
  };
  std::vector<Known> workers;  // every worker started so far
  std::optional<elastic::Membership> published;
  std::optional<elastic::Membership> formed;
  ElasticCounters counters;
};

class ElasticPolicy {
 public:
  using Time = Clock::time_point;

  // Starts the first np workers (see takeActions). `hosts` must have at least np slots.
  ElasticPolicy(ElasticLimits limits, std::vector<HostSlots> hosts, Time now);
  // Takes over a job another launcher ran: its workers, memberships and counts go on as they
  // were. Nothing is decided until the first event or tick (the new leader first reports the
  // workers lost with the old one).
  ElasticPolicy(ElasticLimits limits, std::vector<HostSlots> hosts, const ElasticTakeover& takeover,
                Time now);

  // Worker `id` announced that it waits to join (elastic/ready/<id> is set).
  void ready(int id, Time now);
  // Worker `id` ended (its exit, or its loss when its agent failed). Repeats are ignored.
  void exited(int id, const WorkerEnd& end, Time now);
  // Worker `id` recorded where it is (elastic/place/<id>); repeats of the same place are ignored.
  void placed(int id, const elastic::Place& place, Time now);
  // The discovery script's newest host list.
  void discovered(std::vector<HostSlots> hosts, Time now);
  // Hosts that died with their workers (gyre run --rdzv: a node whose lease expired): their slots
  // are gone before their workers' ends are reported, so that no replacement is started on them.
  // The ends follow (exited: failures), then discovered() with the same list.
  void hostsLost(const std::vector<std::string>& names);
  // Time passed: time-outs.
  void tick(Time now);
  // The supervisor stops the job itself (an interrupt, --timeout, an error of its own): from now
  // on nothing is started or published, and exits are not failures.
  void stopping();

  // The actions decided since the last call, in order.
  std::vector<ElasticAction> takeActions();

  // Workers started and not yet ready: the supervisor checks their ready keys.
  std::vector<int> waitingIds() const;
  // Workers started and not yet exited.
  int aliveCount() const;
  // True when the job is over from the policy's side: every worker exited and none will start.
  bool over() const;
  const ElasticOutcome& outcome() const { return outcome_; }
  ElasticCounters counters() const { return {outcome_.replacements, owed_, unreplaced_, wanted_}; }
  const std::optional<elastic::Membership>& published() const { return published_; }
  // The newest membership that formed (its rendezvous succeeded), as the supervisor reads it
  // from the store before it reports a worker's successful exit: when the job finishes, the
  // workers outside it (newcomers of a later membership that will never form, since the
  // finished member will not arrive) are stopped instead of waiting out the elastic time-out.
  // It also tells which membership the members train in, for finding one that stopped answering.
  void formed(std::optional<elastic::Membership> membership) { formed_ = std::move(membership); }
  // Whether a published membership has not been seen to form yet: the supervisor then reads the
  // formed membership again now and then.
  bool awaitsFormation() const { return published_ && (!formed_ || formed_->epoch < published_->epoch); }

 private:
  enum class Phase { kRunning, kFinishing, kGaveUp, kStopped };
  struct Worker {
    int id = 0;
    std::string host;
    bool ready = false;
    bool exited = false;
    bool stopped = false;  // asked to stop: not a failure, no longer counted
    std::optional<elastic::Place> place;  // as it last recorded it
    Time placedAt{};                      // when that place was first seen
    // The newest membership it is known to have left (waiting after E, or arrived at a later
    // one), when that was first seen and why (empty when it went straight to a later one).
    std::int64_t leftEpoch = 0;
    Time leftAt{};
    std::string leftWhy;
  };

  Worker* find(int id);
  bool active(const Worker& w) const { return !w.exited && !w.stopped; }
  int activeCount() const;
  int usedSlots(const std::string& host) const;
  const HostSlots* freeHost() const;
  int slotsOf(const std::string& host) const;
  void note(std::string text, bool inStory = true);
  void start(bool replacement);
  void fill();
  std::vector<int> readyNewcomers() const;
  std::vector<int> goneMembers() const;
  void update(Time now);
  void publishFirst(Time now);
  void publishNext(Time now);
  void findUnanswering(Time now);
  void giveUp(const std::string& reason, std::vector<Failure> fatal, const std::string& headline);
  void finish(int id);
  void failed(const Worker& w, const WorkerEnd& end);

  ElasticLimits limits_;
  std::vector<HostSlots> hosts_;
  Time begin_;
  Phase phase_ = Phase::kRunning;
  std::vector<Worker> workers_;
  int nextId_ = 0;
  int wanted_ = 0;      // workers the job should have (np; with discovery it follows the slots)
  int owed_ = 0;        // replacements decided and not yet started (no free slot yet)
  int unreplaced_ = 0;  // failures without a replacement left
  std::optional<elastic::Membership> published_;
  Time publishedAt_{};
  std::optional<elastic::Membership> formed_;
  std::optional<Time> belowSince_;
  std::optional<Failure> lastFailure_;
  std::vector<ElasticAction> actions_;
  ElasticOutcome outcome_;
};

}  // namespace gyre::launcher
