#include "launcher/elastic_job.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "common/auth.h"
#include "common/check.h"
#include "common/numbers.h"
#include "elastic/membership.h"
#include "launcher/agent_pool.h"
#include "launcher/elastic_discovery.h"
#include "launcher/elastic_policy.h"
#include "launcher/elastic_report.h"
#include "launcher/elastic_workers.h"
#include "launcher/failures.h"
#include "launcher/output.h"
#include "launcher/run_metrics.h"

namespace gyre::launcher {
namespace {

using Ms = std::chrono::milliseconds;

using numbers::millis;

void checkOptions(const RunOptions& o) {
  GYRE_USAGE_CHECK(
      o.minNp != 0 && o.maxNp != 0,
      "--elastic needs --min-np and --max-np (the fewest workers the job goes on with, and the most "
      "it grows to)");
  GYRE_USAGE_CHECK(o.minNp >= 1, "--min-np must be at least 1 (got ", o.minNp, ")");
  GYRE_USAGE_CHECK(o.minNp <= o.maxNp, "--min-np ", o.minNp, " is above --max-np ", o.maxNp);
  GYRE_USAGE_CHECK(o.np == 0 || (o.np >= o.minNp && o.np <= o.maxNp), "-np ", o.np, " is outside --min-np ",
                   o.minNp, " .. --max-np ", o.maxNp);
  GYRE_USAGE_CHECK(o.discoveryScript.empty() || o.hosts.empty(),
                   "give --host-discovery-script or -H/--hostfile, not both");
}

class ElasticJob {
 public:
  explicit ElasticJob(const RunOptions& o)
      : o_(o), workers_(o_, [this](int id, const WorkerEnd& end) { ended(id, end); }) {}

  int run() {
    signal(SIGPIPE, SIG_IGN);
    installInterruptHandlers();
    const std::vector<HostSlots> hosts = initialHosts();
    ElasticLimits limits;
    limits.np = initialCount(hosts);
    firstWorkers_ = limits.np;
    limits.minNp = o_.minNp;
    limits.maxNp = o_.maxNp;
    limits.maxReplacements = o_.maxRestarts;
    limits.discovery = discovery_.has_value();
    limits.startTimeout = millis(o_.startTimeoutS);
    limits.elasticTimeout = millis(o_.elasticTimeoutS);

    const bool anyRemote =
        std::any_of(hosts.begin(), hosts.end(), [](const HostSlots& h) { return !isLocalHost(h.name); });
    // With discovery, remote hosts may turn up later: listen where they can reach the store.
    store_ = startJobStore(o_.networkInterface, anyRemote || limits.discovery, !limits.discovery);
    client_ = connectTcpStore(store_.localCandidates.front(), store_.secret, std::chrono::seconds(10));
    client_->setTimeout(std::chrono::seconds(10));
    jobId_ = "gyre-" + auth::generateSecret().substr(0, 12);
    output_ = std::make_unique<OutputSink>(limits.np, o_.tagOutput.value_or(o_.maxNp > 1), o_.outputDir);
    workers_.setOutput(*output_);
    deadline_ = o_.timeoutS > 0 ? Deadline::after(millis(o_.timeoutS)) : Deadline::never();

    policy_.emplace(limits, hosts, Clock::now());
    apply(policy_->takeActions());
    supervise();
    output_->flush();
    ElasticEnding ending;
    ending.interrupt = interrupt_;
    ending.timedOut = timedOut_;
    ending.launcherError = launcherError_;
    return reportElasticJob(o_, policy_->outcome(), ending, *output_);
  }

 private:
  std::vector<HostSlots> initialHosts() {
    if (!o_.discoveryScript.empty()) {
      discovery_.emplace(o_.discoveryScript, millis(o_.discoveryIntervalS));
      const HostDiscovery::Result r = discovery_->runNow();
      if (!r.ok) throw Error("--host-discovery-script '" + o_.discoveryScript + "' " + r.error);
      return r.hosts;
    }
    if (!o_.hosts.empty()) {
      placeRanks(o_.hosts, 0);  // refuses a host listed twice
      return o_.hosts;
    }
    // This host only: as many slots as the job starts with (it grows only with discovery).
    return {{"localhost", o_.np > 0 ? o_.np : o_.maxNp}};
  }

  int initialCount(const std::vector<HostSlots>& hosts) const {
    const int slots = totalSlots(hosts);
    const int np = o_.np > 0 ? o_.np : std::min(o_.maxNp, slots);
    GYRE_USAGE_CHECK(np <= slots, "-np ", np, " asks for more workers than the ", slots,
                     " slots known at start; add slots (host:N)");
    GYRE_USAGE_CHECK(np >= o_.minNp, "only ", slots, " slot(s) known at start, below --min-np ", o_.minNp);
    return np;
  }

  void startWorker(const ElasticAction& a) {
    if (a.id >= firstWorkers_) RunMetrics::get().replacementStarted();
    const HostPlacement place{a.host, isLocalHost(a.host), a.id, 1};
    const AgentSpec job = elasticWorkerSpec(o_, store_, place, jobId_, a.hostSlots);
    if (job.storeCandidates.empty()) {
      workers_.end(a.id, WorkerEnd{false,
                                   "could not be started: this host has no non-loopback IPv4 address for "
                                   "remote hosts to reach the job's store",
                                   1, false});
      return;
    }
    workers_.start(a.id, place, job);
  }

  // A worker's end goes to the policy; one that exited 0 may have finished a membership the
  // policy has not seen formed yet.
  void ended(int id, const WorkerEnd& end) {
    if (end.ok) policy_->formed(formedMembership());
    policy_->exited(id, end, Clock::now());
  }

  void apply(const std::vector<ElasticAction>& actions) {
    for (const ElasticAction& a : actions) {
      if (workers_.stopping()) return;
      switch (a.kind) {
        case ElasticAction::Kind::kStart:
          startWorker(a);
          break;
        case ElasticAction::Kind::kStop:
          workers_.stop(a.id);
          break;
        case ElasticAction::Kind::kPublish:
          elastic::publishMembership(*client_, a.membership);
          RunMetrics::get().membership(static_cast<std::uint64_t>(a.membership.epoch),
                                       static_cast<int>(a.membership.members.size()));
          break;
        case ElasticAction::Kind::kNote:
          std::fprintf(stderr, "gyre run: %s\n", a.text.c_str());
          break;
        case ElasticAction::Kind::kFail:
          elastic::publishFailure(*client_, a.text);
          stopEverything();
          break;
      }
    }
  }

  void stopEverything() {
    if (workers_.stopping()) return;
    policy_->stopping();
    workers_.stopAll();
  }

  // The newest membership that formed; nullopt when none did or the store cannot say (the
  // policy then keeps the published membership's members).
  std::optional<elastic::Membership> formedMembership() {
    try {
      return elastic::lastFormedMembership(*client_);
    } catch (const Error& e) {
      std::fprintf(stderr, "gyre run: warning: cannot read the formed membership: %s\n", e.what());
      return std::nullopt;
    }
  }

  // What only the store and the discovery script can say: who is ready, where the workers are
  // in the membership protocol, which membership formed, which hosts there are.
  void poll() {
    for (const int id : policy_->waitingIds())
      if (elastic::isReady(*client_, id)) policy_->ready(id, Clock::now());
    const std::int64_t events = elastic::placeEvents(*client_);
    const Clock::time_point now = Clock::now();
    if (events != placeEvents_ || (policy_->awaitsFormation() && now >= nextFormedRead_)) {
      policy_->formed(elastic::lastFormedMembership(*client_));
      nextFormedRead_ = now + std::chrono::seconds(1);
    }
    if (events != placeEvents_) {
      placeEvents_ = events;
      for (const int id : workers_.ids())
        if (!workers_.ended(id))
          if (const std::optional<elastic::Place> place = elastic::placeOf(*client_, id))
            policy_->placed(id, *place, now);
    }
    if (!discovery_) return;
    const std::optional<HostDiscovery::Result> r = discovery_->poll();
    if (!r) return;
    if (r->ok) {
      lastDiscoveryError_.clear();
      policy_->discovered(r->hosts, Clock::now());
    } else if (r->error != lastDiscoveryError_) {
      lastDiscoveryError_ = r->error;
      std::fprintf(stderr, "gyre run: warning: --host-discovery-script %s; keeping the previous host list\n",
                   r->error.c_str());
    }
  }

  void supervise() {
    while (true) {
      workers_.turn();
      if (!workers_.stopping()) {
        if (const int sig = interruptSignal()) {
          interrupt_ = sig;
          stopEverything();
        } else if (deadline_.expired()) {
          timedOut_ = true;
          stopEverything();
        } else {
          try {
            poll();
            policy_->tick(Clock::now());
            apply(policy_->takeActions());
          } catch (const Error& e) {
            launcherError_ = std::string("the elastic job's store or discovery failed: ") + e.what();
            stopEverything();
          }
        }
      }
      if (workers_.allGone() && (workers_.stopping() || policy_->over())) break;
    }
    workers_.finish();
  }

  const RunOptions& o_;
  ElasticWorkers workers_;
  std::optional<HostDiscovery> discovery_;
  JobStore store_;
  std::shared_ptr<Store> client_;
  std::string jobId_;
  int firstWorkers_ = 0;  // ids below it are the first workers; above, replacements and additions
  std::unique_ptr<OutputSink> output_;
  Deadline deadline_ = Deadline::never();
  std::optional<ElasticPolicy> policy_;
  std::string lastDiscoveryError_;
  std::string launcherError_;
  std::int64_t placeEvents_ = 0;  // the places counter when the places were last read
  Clock::time_point nextFormedRead_{};
  int interrupt_ = 0;
  bool timedOut_ = false;
};

}  // namespace

AgentSpec elasticWorkerSpec(const RunOptions& o, const JobStore& store, const HostPlacement& place,
                            const std::string& jobId, int coreShare) {
  AgentSpec job = baseAgentSpec(o, store, place, jobId);
  const int id = place.firstRank;
  job.worldSize = id + 1;  // the agent's ranks are ids; workers ignore them (GYRE_ELASTIC=1)
  job.firstRank = id;
  job.count = 1;
  job.coreShare = coreShare;
  job.maxRestarts = o.maxRestarts;
  job.env.insert(job.env.end(),
                 {{"GYRE_ELASTIC", "1"},
                  {"GYRE_ELASTIC_ID", std::to_string(id)},
                  {"GYRE_MIN_NP", std::to_string(o.minNp)},
                  {"GYRE_MAX_NP", std::to_string(o.maxNp)},
                  {"GYRE_ELASTIC_TIMEOUT_MS",
                   std::to_string(std::min<std::int64_t>(millis(o.elasticTimeoutS).count(), INT32_MAX))}});
  return job;
}

std::string lostAgentText(const std::string& failedText, const std::string& agentCommand,
                          const ChildExit& e) {
  if (!failedText.empty()) return "could not be started: " + failedText;
  const std::string how =
      e.signal != 0 ? "was killed by " + signalName(e.signal) : "exited with code " + std::to_string(e.code);
  return "was lost: its agent (" + agentCommand + ") " + how + " before the worker's exit was reported";
}

int runElasticJob(const RunOptions& options) {
  checkOptions(options);
  return ElasticJob(options).run();
}

}  // namespace gyre::launcher
