#include "launcher/rdzv_job.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/auth.h"
#include "common/check.h"
#include "common/mutex.h"
#include "common/numbers.h"
#include "common/socket.h"
#include "elastic/membership.h"
#include "launcher/agent_pool.h"
#include "launcher/elastic_job.h"
#include "launcher/elastic_policy.h"
#include "launcher/elastic_report.h"
#include "launcher/elastic_workers.h"
#include "launcher/failures.h"
#include "launcher/output.h"
#include "launcher/rdzv_keys.h"
#include "launcher/run_metrics.h"
#include "rendezvous/etcd_client.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;
using rendezvous::EtcdKeyValue;

constexpr Ms kEtcdEvery{100};                  // reads of the job's keys
constexpr std::chrono::seconds kGoneWait{10};  // the leader waits this long for the others to go

class RdzvJob {
 public:
  explicit RdzvJob(const RunOptions& o)
      : o_(o),
        url_(rendezvous::parseEtcdUrl(o.rdzv)),
        workers_(o_, [this](int id, const WorkerEnd& end) { ended(id, end); }) {}

  int run() {
    signal(SIGPIPE, SIG_IGN);
    installInterruptHandlers();
    const Ms reach = numbers::millis(o_.startTimeoutS);
    try {
      etcd_ = std::make_unique<rendezvous::EtcdClient>(url_.endpoints, reach);
    } catch (const Error& e) {
      throw Error("--rdzv " + o_.rdzv + ": " + e.what());
    }
    // A previous job under this path ended (its keys were left, or its leader is deleting them):
    // wait for its nodes to go, then start afresh.
    if (etcd_->get(key("end"))) {
      const Deadline gone = Deadline::after(kLeaseTtl + kGoneWait);
      while (!etcd_->list(key("nodes/")).empty() && !gone.expired()) std::this_thread::sleep_for(kEtcdEvery);
      etcd_->erasePrefix(url_.prefix);
    }
    lease_ = etcd_->grantLease(kLeaseTtl);
    keeper_ = std::make_unique<LeaseKeeper>(url_.endpoints, lease_);
    node_ = net::hostName() + ":" + std::to_string(::getpid());
    etcd_->putIfRevision(key("secret"), 0, asBytes(auth::generateSecret()));
    etcd_->putIfRevision(key("job-id"), 0, asBytes("gyre-" + auth::generateSecret().substr(0, 12)));
    jobStore_.secret = required("secret");
    jobStore_.localCandidates = jobStore_.remoteCandidates = {o_.rdzv};
    jobId_ = required("job-id");
    etcd_->put(key("nodes/" + node_), asBytes(std::to_string(slots())), lease_);
    store_ = connectEtcdStore(o_.rdzv, reach);
    store_->setTimeout(std::chrono::seconds(10));
    say("node " + node_ + " joined job " + formatEtcdUrlPath() + " with " + std::to_string(slots()) +
        " slot(s)");
    output_ = std::make_unique<OutputSink>(o_.maxNp, o_.tagOutput.value_or(true), o_.outputDir);
    workers_.setOutput(*output_);
    deadline_ = o_.timeoutS > 0 ? Deadline::after(numbers::millis(o_.timeoutS)) : Deadline::never();
    supervise();
    output_->flush();
    return finish();
  }

 private:
  int slots() const { return o_.np > 0 ? o_.np : 1; }

  std::string required(const std::string& k) {
    const auto kv = etcd_->get(key(k));
    if (!kv)
      throw Error("the job's key " + key(k) +
                  " vanished as this node joined (did another gyre run delete the job "
                  "under this path?)");
    return asText(kv->value);
  }
  std::string key(const std::string& k) const { return url_.prefix + "launch/" + k; }
  std::string formatEtcdUrlPath() const { return url_.prefix.substr(0, url_.prefix.size() - 1); }

  // --- this node: its workers -------------------------------------------------------------

  void startWorker(int id) {
    const HostPlacement place{"localhost", true, id, 1};
    const AgentSpec job = elasticWorkerSpec(o_, jobStore_, place, jobId_, slots());
    etcd_->put(key("alive/" + std::to_string(id)), asBytes(node_), lease_);
    workers_.start(id, place, job);
  }

  // Records how worker `id` of this node ended, for the leader: now, or (etcd not answering)
  // in a later round; the node does not exit before every end is recorded or etcd failed it.
  void ended(int id, const WorkerEnd& end) {
    unrecorded_[id] = end;
    recordEnds();
  }

  void recordEnds() {
    for (auto it = unrecorded_.begin(); it != unrecorded_.end();) {
      try {
        etcd_->put(key("exit/" + std::to_string(it->first)), asBytes(formatEnd(it->second)));
        etcd_->erase(key("alive/" + std::to_string(it->first)));
        it = unrecorded_.erase(it);
      } catch (const Error& e) {
        say("warning: cannot record worker " + std::to_string(it->first) + "'s end in etcd yet: " + e.what());
        return;
      }
    }
  }

  // Starts what the leader assigned to this node, stops what it asks to stop, sees the end.
  void follow() {
    if (!workers_.stopping())
      for (const EtcdKeyValue& kv : etcd_->list(key("start/"))) {
        const int id = idOf(kv.key);
        if (id >= 0 && asText(kv.value) == node_ && !workers_.has(id)) startWorker(id);
      }
    for (const EtcdKeyValue& kv : etcd_->list(key("stop/"))) {
      const int id = idOf(kv.key);
      if (workers_.has(id) && !workers_.ended(id) && stopped_.insert(id).second) workers_.stop(id);
    }
    if (const auto end = etcd_->get(key("end"))) end_ = asText(end->value);
  }

  void checkLease() {
    if (!keeper_->expired()) return;
    lostLease_ = true;
    throw Error("this node's lease in etcd expired (it could not renew it within " +
                std::to_string(kLeaseTtl.count()) + " s): the job counts its workers as lost");
  }

  // --- the leader -------------------------------------------------------------------------

  std::vector<HostSlots> liveNodes() {
    std::vector<HostSlots> nodes;
    for (const EtcdKeyValue& kv : etcd_->list(key("nodes/"))) {
      const std::string name = kv.key.substr(key("nodes/").size());
      nodes.push_back({name, std::max(1, std::atoi(asText(kv.value).c_str()))});
    }
    return nodes;
  }

  ElasticLimits limits(int np) const {
    ElasticLimits l;
    l.np = np;
    l.minNp = o_.minNp;
    l.maxNp = o_.maxNp;
    l.maxReplacements = o_.maxRestarts;
    l.discovery = true;  // nodes come and go
    l.startTimeout = numbers::millis(o_.startTimeoutS);
    l.elasticTimeout = numbers::millis(o_.elasticTimeoutS);
    return l;
  }

  // Whether this node holds the leader key (a compare-and-swap whose answer was lost may have
  // taken it: read it back).
  bool takeLeaderKey() {
    if (etcd_->putIfRevision(key("leader"), 0, asBytes(node_), lease_)) return true;
    const auto leader = etcd_->get(key("leader"));
    return leader && asText(leader->value) == node_ && leader->lease == lease_;
  }

  std::set<int> idsUnder(const std::string& dir) {
    std::set<int> ids;
    for (const EtcdKeyValue& kv : etcd_->list(key(dir)))
      if (const int id = idOf(kv.key); id >= 0) ids.insert(id);
    return ids;
  }

  void tryToLead(Clock::time_point now) {
    if (!takeLeaderKey()) return;
    const std::vector<HostSlots> nodes = liveNodes();
    const std::vector<EtcdKeyValue> starts = etcd_->list(key("start/"));
    std::optional<elastic::Membership> published = elastic::latestMembership(*store_);
    if (!published && starts.empty()) {
      int total = 0;
      for (const HostSlots& n : nodes) total += n.slots;
      if (total < o_.minNp) {
        // Not enough slots yet: lead later, when more nodes have joined.
        if (!waitingSince_) waitingSince_ = now;
        etcd_->erase(key("leader"));
        if (now - *waitingSince_ > numbers::millis(o_.startTimeoutS)) {
          const std::string why =
              "only " + std::to_string(total) + " slot(s) joined within --start-timeout " +
              formatSeconds(o_.startTimeoutS) + " s, below --min-np " + std::to_string(o_.minNp);
          etcd_->put(key("end"), asBytes("1 " + why));
        }
        return;
      }
      say("node " + node_ + " leads the job");
      policy_.emplace(limits(std::min(o_.maxNp, total)), nodes, now);
      lastNodes_ = nodes;
      leading(now);
      return;
    }
    ElasticTakeover t;
    t.published = published;
    t.formed = elastic::lastFormedMembership(*store_);
    // Ends the previous leader counted; the others (recorded after it died) are counted anew.
    const std::set<int> counted = idsUnder("counted/");
    const std::set<int> stops = idsUnder("stop/");
    for (const EtcdKeyValue& kv : starts) {
      const int id = idOf(kv.key);
      if (id < 0) continue;
      t.workers.push_back(
          {id, asText(kv.value), counted.contains(id), elastic::isReady(*store_, id), stops.contains(id)});
      if (counted.contains(id)) reported_.insert(id);
    }
    if (const auto counters = etcd_->get(key("policy"))) {
      std::istringstream in(asText(counters->value));
      in >> t.counters.replacements >> t.counters.owed >> t.counters.unreplaced >> t.counters.wanted;
    }
    say("node " + node_ + " takes over as the job's leader (the previous one is gone); membership " +
        std::to_string(published ? published->epoch : 0) + " was the newest");
    policy_.emplace(limits(std::max(1, t.counters.wanted)), nodes, t, now);
    lastNodes_ = nodes;
    leading(now);
  }

  std::map<int, WorkerEnd> readExits() {
    std::map<int, WorkerEnd> exits;
    for (const EtcdKeyValue& kv : etcd_->list(key("exit/")))
      if (const int id = idOf(kv.key); id >= 0) exits[id] = parseEnd(asText(kv.value));
    return exits;
  }

  // One round of leading: what happened (ends, lost nodes, readiness, places), then the policy's
  // decisions.
  void leading(Clock::time_point now) {
    if (const auto leader = etcd_->get(key("leader")); !leader || asText(leader->value) != node_) {
      say("warning: node " + node_ + " no longer holds the leader key; it stops leading");
      policy_.reset();
      return;
    }
    std::vector<HostSlots> nodes = liveNodes();
    std::set<std::string> live;
    for (const HostSlots& n : nodes) live.insert(n.name);
    std::set<int> alive;
    for (const EtcdKeyValue& kv : etcd_->list(key("alive/"))) alive.insert(idOf(kv.key));
    const std::map<int, WorkerEnd> exits = readExits();
    // Nodes that are gone first: their workers' replacements must go elsewhere.
    std::vector<std::string> lost;
    for (const HostSlots& n : lastNodes_)
      if (!live.contains(n.name)) lost.push_back(n.name);
    policy_->hostsLost(lost);
    for (const EtcdKeyValue& kv : etcd_->list(key("start/"))) {
      const int id = idOf(kv.key);
      if (id < 0 || reported_.contains(id)) continue;
      if (const auto it = exits.find(id); it != exits.end()) {
        if (it->second.ok) policy_->formed(elastic::lastFormedMembership(*store_));
        count(id, it->second, now);
      } else if (!alive.contains(id) && !live.contains(asText(kv.value))) {
        count(id,
              WorkerEnd{false, "was lost with node " + asText(kv.value) + " (its etcd lease expired)", 1,
                        false},
              now);
      }
    }
    if (nodes != lastNodes_) {
      lastNodes_ = nodes;
      policy_->discovered(std::move(nodes), now);
    }
    for (const int id : policy_->waitingIds())
      if (elastic::isReady(*store_, id)) policy_->ready(id, now);
    const std::int64_t events = elastic::placeEvents(*store_);
    if (events != placeEvents_ || policy_->awaitsFormation())
      policy_->formed(elastic::lastFormedMembership(*store_));
    if (events != placeEvents_) {
      placeEvents_ = events;
      for (const int id : alive)
        if (const std::optional<elastic::Place> place = elastic::placeOf(*store_, id))
          policy_->placed(id, *place, now);
    }
    policy_->tick(now);
    const std::vector<ElasticAction> actions = policy_->takeActions();
    // The counts first: a leader that dies between them and its actions leaves its successor
    // short of a worker (which it starts), never with a replacement started twice.
    const ElasticCounters c = policy_->counters();
    const std::string counters = std::to_string(c.replacements) + " " + std::to_string(c.owed) + " " +
                                 std::to_string(c.unreplaced) + " " + std::to_string(c.wanted);
    if (counters != lastCounters_) {
      etcd_->put(key("policy"), asBytes(counters));
      lastCounters_ = counters;
    }
    apply(actions);
    if (policy_->over() && !end_) {
      ElasticEnding ending;
      leaderCode_ = reportElasticJob(o_, policy_->outcome(), ending, *output_);
      const std::string why = policy_->outcome().finished ? "the job finished" : policy_->outcome().headline;
      etcd_->put(key("end"), asBytes(std::to_string(leaderCode_) + " " + why));
      end_ = std::to_string(leaderCode_) + " " + why;
      reportedEnd_ = true;
    }
  }

  // Gives worker `id`'s end to the policy, once, and records that it did (for a successor).
  void count(int id, const WorkerEnd& end, Clock::time_point now) {
    reported_.insert(id);
    policy_->exited(id, end, now);
    etcd_->put(key("counted/" + std::to_string(id)), {});
  }

  void apply(const std::vector<ElasticAction>& actions) {
    for (const ElasticAction& a : actions) {
      switch (a.kind) {
        case ElasticAction::Kind::kStart:
          etcd_->put(key("start/" + std::to_string(a.id)), asBytes(a.host));
          break;
        case ElasticAction::Kind::kStop:
          etcd_->put(key("stop/" + std::to_string(a.id)), {});
          break;
        case ElasticAction::Kind::kPublish:
          elastic::publishMembership(*store_, a.membership);
          RunMetrics::get().membership(static_cast<std::uint64_t>(a.membership.epoch),
                                       static_cast<int>(a.membership.members.size()));
          break;
        case ElasticAction::Kind::kNote:
          say(a.text);
          break;
        case ElasticAction::Kind::kFail: {
          elastic::publishFailure(*store_, a.text);
          // Workers that do not read the failure (or are stuck) are stopped by their nodes.
          const std::set<int> exited = idsUnder("exit/");
          for (const int id : idsUnder("start/"))
            if (!exited.contains(id)) etcd_->put(key("stop/" + std::to_string(id)), {});
          break;
        }
      }
    }
  }

  // --- the loop ---------------------------------------------------------------------------

  void stopLocal() { workers_.stopAll(); }

  // An interrupt or --timeout of this node: it leaves the job at once (its lease revoked, so the
  // leader, or the node that takes the leader key, counts its workers as lost and goes on) and
  // stops its workers. The last node of a job ends the job.
  void leave() {
    policy_.reset();
    try {
      const std::vector<HostSlots> nodes = liveNodes();
      if (std::all_of(nodes.begin(), nodes.end(), [&](const HostSlots& n) { return n.name == node_; }) &&
          !end_) {
        const std::string why =
            interrupt_ != 0 ? "stopped by " + signalName(interrupt_) : "stopped at --timeout";
        etcd_->put(key("end"), asBytes(std::to_string(interrupt_ != 0 ? 128 + interrupt_ : 124) + " " + why));
      }
      etcd_->revokeLease(lease_);
    } catch (const Error& e) {
      say("warning: cannot leave the job in etcd (" + std::string(e.what()) + "); its lease expires within " +
          std::to_string(kLeaseTtl.count()) + " s");
    }
    left_ = true;
  }

  void supervise() {
    while (true) {
      workers_.turn();
      const Clock::time_point now = Clock::now();
      if (!workers_.stopping()) {
        if (const int sig = interruptSignal()) {
          interrupt_ = sig;
        } else if (deadline_.expired()) {
          timedOut_ = true;
        }
        if (interrupt_ != 0 || timedOut_) {
          leave();
          stopLocal();
        }
      }
      if (now >= nextRead_ && !etcdFailed()) {
        nextRead_ = now + kEtcdEvery;
        try {
          recordEnds();
          if (!left_) {
            checkLease();
            follow();
            if (!policy_ && !end_) tryToLead(now);
            if (policy_ && !reportedEnd_) leading(now);
          }
        } catch (const Error& e) {
          etcdError_ = e.what();
          stopLocal();
        }
      }
      if (workers_.allGone() && (workers_.stopping() || end_) && (unrecorded_.empty() || etcdFailed())) break;
    }
    workers_.finish();
  }

  bool etcdFailed() const { return !etcdError_.empty(); }

  // The leader waits for the other nodes to read the end, then deletes the job's keys.
  void cleanUp() {
    if (!reportedEnd_) return;
    const Deadline deadline = Deadline::after(kGoneWait);
    try {
      while (!deadline.expired()) {
        const std::vector<HostSlots> nodes = liveNodes();
        if (std::all_of(nodes.begin(), nodes.end(), [&](const HostSlots& n) { return n.name == node_; }))
          break;
        std::this_thread::sleep_for(kEtcdEvery);
      }
      etcd_->erasePrefix(url_.prefix);
    } catch (const Error& e) {
      say("warning: cannot delete the job's keys in etcd: " + std::string(e.what()));
    }
  }

  int finish() {
    if (etcdFailed()) {
      say("node " + node_ + ": " + etcdError_ + "; stopped its workers");
      return 1;
    }
    cleanUp();
    try {
      if (!lostLease_ && !left_) etcd_->revokeLease(lease_);
    } catch (const Error&) {
      // Expired already: nothing to give back.
    }
    if (interrupt_ != 0) {
      say("interrupted by " + signalName(interrupt_) +
          "; stopped this node's workers (the job goes on without them)");
      return 128 + interrupt_;
    }
    if (timedOut_) {
      say("this node ran past --timeout " + formatSeconds(o_.timeoutS) + " s; stopped its workers");
      return 124;
    }
    if (reportedEnd_) return leaderCode_;
    std::istringstream in(end_.value_or("1 the job ended without a word"));
    int code = 1;
    std::string why;
    in >> code;
    std::getline(in >> std::ws, why);
    say("node " + node_ + ": " + why + " (exit code " + std::to_string(code) +
        ", as the job's leader reported)");
    return code;
  }

  const RunOptions& o_;
  rendezvous::EtcdUrl url_;
  ElasticWorkers workers_;
  std::unique_ptr<rendezvous::EtcdClient> etcd_;
  std::int64_t lease_ = 0;
  std::unique_ptr<LeaseKeeper> keeper_;
  std::string node_;
  JobStore jobStore_;
  std::string jobId_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<OutputSink> output_;
  Deadline deadline_ = Deadline::never();
  std::set<int> stopped_;
  std::optional<ElasticPolicy> policy_;
  std::set<int> reported_;  // leader: worker ends given to the policy
  std::vector<HostSlots> lastNodes_;
  std::string lastCounters_;
  std::int64_t placeEvents_ = 0;
  std::optional<Clock::time_point> waitingSince_;
  std::optional<std::string> end_;
  bool reportedEnd_ = false;  // this node led the job to its end
  int leaderCode_ = 0;
  Clock::time_point nextRead_{};
  std::string etcdError_;
  bool lostLease_ = false;
  bool left_ = false;                    // leave(): this node gave up its lease
  std::map<int, WorkerEnd> unrecorded_;  // ends of this node's workers not yet in etcd
  int interrupt_ = 0;
  bool timedOut_ = false;
};

}  // namespace

int runRdzvJob(const RunOptions& o) {
  GYRE_USAGE_CHECK(o.elastic,
                   "--rdzv needs --elastic (with --min-np and --max-np): a job in etcd is elastic");
  GYRE_USAGE_CHECK(o.minNp >= 1 && o.maxNp >= o.minNp,
                   "--rdzv needs --min-np and --max-np (1 <= min <= max)");
  GYRE_USAGE_CHECK(o.hosts.empty() && o.discoveryScript.empty(),
                   "--rdzv starts workers on this host only: run gyre run --rdzv on every host instead of "
                   "-H/--hostfile/--host-discovery-script");
  GYRE_USAGE_CHECK(o.servers == 0, "--servers does not work with --rdzv");
  const rendezvous::EtcdUrl url = rendezvous::parseEtcdUrl(o.rdzv);
  GYRE_USAGE_CHECK(url.hasPath, "--rdzv ", o.rdzv,
                   ": name the job in the address's path (etcd://host:port/JOB), the same "
                   "on every host");
  return RdzvJob(o).run();
}

}  // namespace gyre::launcher
