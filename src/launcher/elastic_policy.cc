#include "launcher/elastic_policy.h"

#include <algorithm>

#include "common/check.h"
#include "common/clock.h"

namespace gyre::launcher {
namespace {

std::string workers(int n) {
  return std::to_string(n) + (n == 1 ? " worker" : " workers");
}

std::string idList(const std::vector<int>& ids) {
  return ids.empty() ? "none" : rankList(ids);
}

}  // namespace

ElasticPolicy::ElasticPolicy(ElasticLimits limits, std::vector<HostSlots> hosts, Time now)
    : limits_(limits), hosts_(std::move(hosts)), begin_(now), wanted_(limits.np) {
  GYRE_ARG_CHECK(limits_.minNp >= 1 && limits_.minNp <= limits_.maxNp, "elastic limits: --min-np ",
                 limits_.minNp, " and --max-np ", limits_.maxNp);
  GYRE_ARG_CHECK(limits_.np >= limits_.minNp && limits_.np <= limits_.maxNp, "elastic limits: -np ",
                 limits_.np, " outside [", limits_.minNp, ", ", limits_.maxNp, "]");
  GYRE_ARG_CHECK(totalSlots(hosts_) >= limits_.np, "elastic limits: -np ", limits_.np, " but ",
                 totalSlots(hosts_), " slots");
  fill();
}

ElasticPolicy::ElasticPolicy(ElasticLimits limits, std::vector<HostSlots> hosts, const ElasticTakeover& t,
                             Time now)
    : limits_(limits),
      hosts_(std::move(hosts)),
      begin_(now),
      wanted_(t.counters.wanted),
      owed_(t.counters.owed),
      unreplaced_(t.counters.unreplaced),
      published_(t.published),
      publishedAt_(now),
      formed_(t.formed) {
  for (const ElasticTakeover::Known& k : t.workers) {
    Worker w;
    w.id = k.id;
    w.host = k.host;
    w.exited = k.exited;
    w.ready = k.ready;
    w.stopped = k.stopped;
    workers_.push_back(w);
    nextId_ = std::max(nextId_, k.id + 1);
  }
  outcome_.replacements = t.counters.replacements;
  outcome_.epochs = published_ ? static_cast<int>(published_->epoch) : 0;
}

ElasticPolicy::Worker* ElasticPolicy::find(int id) {
  for (Worker& w : workers_)
    if (w.id == id) return &w;
  return nullptr;
}

int ElasticPolicy::activeCount() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [&](const Worker& w) { return active(w); }));
}

int ElasticPolicy::aliveCount() const {
  return static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.exited; }));
}

int ElasticPolicy::usedSlots(const std::string& host) const {
  // A worker asked to stop holds its slot until it has exited.
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [&](const Worker& w) { return !w.exited && w.host == host; }));
}

int ElasticPolicy::slotsOf(const std::string& host) const {
  for (const HostSlots& h : hosts_)
    if (h.name == host) return h.slots;
  return 0;
}

const HostSlots* ElasticPolicy::freeHost() const {
  for (const HostSlots& h : hosts_)
    if (usedSlots(h.name) < h.slots) return &h;
  return nullptr;
}

void ElasticPolicy::note(std::string text, bool inStory) {
  if (inStory) outcome_.story.push_back(text);
  ElasticAction a;
  a.kind = ElasticAction::Kind::kNote;
  a.text = std::move(text);
  actions_.push_back(std::move(a));
}

void ElasticPolicy::start(bool replacement) {
  const HostSlots* host = freeHost();
  GYRE_ENFORCE(host != nullptr, "no free slot to start a worker on");
  Worker w;
  w.id = nextId_++;
  w.host = host->name;
  workers_.push_back(w);
  ElasticAction a;
  a.kind = ElasticAction::Kind::kStart;
  a.id = w.id;
  a.host = w.host;
  a.hostSlots = host->slots;
  actions_.push_back(std::move(a));
  const std::string where = "starting worker " + std::to_string(w.id) + " on host " + w.host;
  if (replacement) {
    ++outcome_.replacements;
    note(where + " to replace a lost one (replacement " + std::to_string(outcome_.replacements) + " of " +
         std::to_string(limits_.maxReplacements) + ", --max-restarts)");
  } else if (w.id >= limits_.np) {
    note(where + " (a discovered slot)");
  }
}

void ElasticPolicy::fill() {
  if (phase_ != Phase::kRunning) return;
  const int desired = std::min(limits_.maxNp, wanted_ - unreplaced_);
  while (activeCount() < desired && freeHost() != nullptr) {
    const bool replacement = owed_ > 0;
    if (replacement) --owed_;
    start(replacement);
  }
}

std::vector<int> ElasticPolicy::readyNewcomers() const {
  std::vector<int> ids;
  for (const Worker& w : workers_)
    if (active(w) && w.ready && (!published_ || published_->rankOf(w.id) < 0)) ids.push_back(w.id);
  return ids;
}

std::vector<int> ElasticPolicy::goneMembers() const {
  std::vector<int> ids;
  if (!published_) return ids;
  for (const int id : published_->members) {
    const auto it =
        std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.id == id; });
    if (it == workers_.end() || !active(*it)) ids.push_back(id);
  }
  return ids;
}

void ElasticPolicy::ready(int id, Time now) {
  Worker* w = find(id);
  if (w == nullptr || !active(*w) || w->ready) return;
  w->ready = true;
  update(now);
}

void ElasticPolicy::exited(int id, const WorkerEnd& end, Time now) {
  Worker* w = find(id);
  if (w == nullptr || w->exited) return;
  w->exited = true;
  const bool counts = !w->stopped && phase_ != Phase::kGaveUp && phase_ != Phase::kStopped;
  if (counts && end.ok && phase_ == Phase::kRunning) finish(id);
  if (counts && !end.ok) failed(*w, end);
  update(now);
}

void ElasticPolicy::failed(const Worker& w, const WorkerEnd& end) {
  Failure f{w.id, "worker " + std::to_string(w.id) + " on host " + w.host + " " + end.what, end.exitCode,
            end.bySignal};
  f.restartable = true;
  if (phase_ == Phase::kFinishing) {
    giveUp("worker " + std::to_string(w.id) + " failed while the job was finishing", {f},
           "worker " + std::to_string(w.id) + " failed after the job began to finish");
    return;
  }
  outcome_.tolerated.push_back(f);
  lastFailure_ = f;
  if (outcome_.replacements + owed_ < limits_.maxReplacements)
    ++owed_;
  else
    ++unreplaced_;
  const int left = activeCount();
  if (!limits_.discovery && left == 0 && owed_ == 0) return;  // the job is lost: the report says it
  if (left >= limits_.minNp)
    note(f.message + "; continuing with " + workers(left) + " (elastic: --min-np " +
         std::to_string(limits_.minNp) + ")");
  else
    note(f.message + "; " + workers(left) + " left, below --min-np " + std::to_string(limits_.minNp) +
         ": waiting up to " + formatSeconds(seconds(limits_.elasticTimeout)) +
         " s (--elastic-timeout) for more");
}

void ElasticPolicy::placed(int id, const elastic::Place& place, Time now) {
  Worker* w = find(id);
  if (w == nullptr) return;
  const auto same = [](const elastic::Place& a, const elastic::Place& b) {
    return a.kind == b.kind && a.epoch == b.epoch && a.reason == b.reason;
  };
  if (w->place && same(*w->place, place)) return;
  w->place = place;
  w->placedAt = now;
  // Waiting after E, or arrived at E + 1 (the launcher may never see the waiting in between):
  // it has left E.
  const bool waiting = place.kind == elastic::Place::Kind::kWaiting;
  const std::int64_t left = waiting ? place.epoch : place.epoch - 1;
  if (left > w->leftEpoch) {
    w->leftEpoch = left;
    w->leftAt = now;
    w->leftWhy = waiting ? place.reason : std::string();
  }
  update(now);
}

void ElasticPolicy::findUnanswering(Time now) {
  using Kind = elastic::Place::Kind;
  std::int64_t timeoutMs = 0;
  for (const Worker& w : workers_)
    if (w.place) timeoutMs = std::max(timeoutMs, w.place->timeoutMs);
  if (timeoutMs == 0) return;  // the workers do not record places (they do not use gyre::elastic)
  const std::chrono::milliseconds grace(timeoutMs + std::max<std::int64_t>(2000, timeoutMs / 2));
  const std::int64_t formed = formed_ ? formed_->epoch : 0;
  // The first member seen to leave the membership the members train in (leaving is collective or
  // spreads within a time-out: every other member must follow within the grace).
  const Worker* leaver = nullptr;
  for (const Worker& w : workers_)
    if (formed > 0 && formed_->rankOf(w.id) >= 0 && w.leftEpoch >= formed &&
        (leaver == nullptr || w.leftAt < leaver->leftAt))
      leaver = &w;
  std::vector<std::pair<int, std::string>> unanswering;  // id, what
  for (const Worker& w : workers_) {
    if (!active(w) || !w.place) continue;
    const bool trains = formed > 0 && formed_->rankOf(w.id) >= 0 && w.place->kind == Kind::kArrived &&
                        w.place->epoch == formed;
    if (trains) {
      if (leaver != nullptr && now - leaver->leftAt >= grace)
        unanswering.emplace_back(w.id, "stopped answering: worker " + std::to_string(leaver->id) +
                                           " left membership " + std::to_string(formed) + " " +
                                           formatSeconds(seconds(now - leaver->leftAt)) + " s ago" +
                                           (leaver->leftWhy.empty() ? "" : " (" + leaver->leftWhy + ")") +
                                           " and it is still in it");
      continue;
    }
    // Waiting for a membership: it must reach the rendezvous of a newer one that holds it.
    if (published_->epoch <= formed || published_->rankOf(w.id) < 0) continue;
    if (w.place->kind == Kind::kArrived && w.place->epoch >= published_->epoch) continue;
    const Time since = std::max(publishedAt_, w.placedAt);
    if (now - since >= grace)
      unanswering.emplace_back(w.id, "stopped answering: it did not reach the rendezvous of membership " +
                                         std::to_string(published_->epoch) + " within " +
                                         formatSeconds(seconds(grace)) + " s");
  }
  for (const auto& [id, what] : unanswering) {
    Worker& w = *find(id);
    w.stopped = true;  // no longer a member; it holds its slot until it has exited
    ElasticAction a;
    a.kind = ElasticAction::Kind::kStop;
    a.id = id;
    actions_.push_back(std::move(a));
    failed(w, WorkerEnd{false, what + "; stopping it", 1, false});
    if (phase_ != Phase::kRunning) return;
  }
}

void ElasticPolicy::discovered(std::vector<HostSlots> hosts, Time now) {
  const int before = totalSlots(hosts_);
  hosts_ = std::move(hosts);
  const int after = totalSlots(hosts_);
  if (phase_ != Phase::kRunning) return;
  // Workers beyond their host's slots (a host that left has none) stop, the newest first.
  std::vector<std::string> names;
  for (const Worker& w : workers_)
    if (active(w) && std::find(names.begin(), names.end(), w.host) == names.end()) names.push_back(w.host);
  for (const std::string& name : names) {
    std::vector<Worker*> on;
    for (Worker& w : workers_)
      if (active(w) && w.host == name) on.push_back(&w);
    const int allowed = slotsOf(name);
    std::vector<int> stopped;
    for (auto it = on.rbegin(); it != on.rend() && static_cast<int>(on.size() - stopped.size()) > allowed;
         ++it) {
      (*it)->stopped = true;
      stopped.push_back((*it)->id);
      ElasticAction a;
      a.kind = ElasticAction::Kind::kStop;
      a.id = (*it)->id;
      actions_.push_back(std::move(a));
    }
    if (stopped.empty()) continue;
    std::reverse(stopped.begin(), stopped.end());
    note((allowed == 0 ? "host " + name + " is no longer discovered"
                       : "host " + name + " has " + std::to_string(allowed) + " slot(s) now") +
         "; stopping worker(s) " + idList(stopped));
  }
  if (after > before) {
    wanted_ = std::min(limits_.maxNp, after);
    unreplaced_ = 0;  // new capacity: use it, whatever was lost before
  } else {
    wanted_ = std::min(wanted_, after);
  }
  update(now);
}

void ElasticPolicy::hostsLost(const std::vector<std::string>& names) {
  std::erase_if(hosts_, [&](const HostSlots& h) {
    return std::find(names.begin(), names.end(), h.name) != names.end();
  });
}

void ElasticPolicy::tick(Time now) {
  update(now);
}

void ElasticPolicy::stopping() {
  phase_ = Phase::kStopped;
  outcome_.finished = false;
}

void ElasticPolicy::update(Time now) {
  if (phase_ != Phase::kRunning) return;
  fill();
  if (!limits_.discovery && activeCount() == 0 && lastFailure_) {
    giveUp("every worker is lost", {*lastFailure_},
           "every worker is lost and none can be started (" + std::to_string(outcome_.replacements) +
               " replacement(s) of --max-restarts " + std::to_string(limits_.maxReplacements) + " used)");
    return;
  }
  if (!published_) {
    publishFirst(now);
    return;
  }
  findUnanswering(now);
  if (phase_ == Phase::kRunning) publishNext(now);
}

void ElasticPolicy::publishFirst(Time now) {
  std::vector<int> ready;
  bool allReady = true;
  int active = 0;
  for (const Worker& w : workers_) {
    if (!this->active(w)) continue;
    ++active;
    allReady &= w.ready;
    if (w.ready) ready.push_back(w.id);
  }
  const bool late = now - begin_ >= limits_.startTimeout;
  const int n = static_cast<int>(ready.size());
  if (n >= limits_.minNp && (allReady || late)) {
    published_ = elastic::Membership{1, elastic::nextMembers({}, {}, ready, limits_.maxNp)};
    publishedAt_ = now;
  } else if (late) {
    const std::string reason = "only " + std::to_string(n) + " of " + workers(active) +
                               " ready to join within --start-timeout " +
                               formatSeconds(seconds(limits_.startTimeout)) + " s, below --min-np " +
                               std::to_string(limits_.minNp) + "; stopping";
    giveUp(reason, {Failure{-1, reason, 1}}, "the first membership never formed");
    return;
  } else {
    return;
  }
  outcome_.epochs = 1;
  ElasticAction a;
  a.kind = ElasticAction::Kind::kPublish;
  a.membership = *published_;
  actions_.push_back(std::move(a));
  note("elastic epoch 1: workers " + idList(published_->members));
}

void ElasticPolicy::publishNext(Time now) {
  const std::vector<int> gone = goneMembers();
  const std::vector<int> next =
      elastic::nextMembers(published_->members, gone, readyNewcomers(), limits_.maxNp);
  const std::size_t kept = published_->members.size() - gone.size();
  const bool changed = !gone.empty() || next.size() > kept;
  if (static_cast<int>(next.size()) >= limits_.minNp) {
    belowSince_.reset();
    if (!changed) return;
    published_ = elastic::Membership{published_->epoch + 1, next};
    publishedAt_ = now;
    outcome_.epochs = static_cast<int>(published_->epoch);
    ElasticAction a;
    a.kind = ElasticAction::Kind::kPublish;
    a.membership = *published_;
    actions_.push_back(std::move(a));
    note("elastic epoch " + std::to_string(published_->epoch) + ": workers " + idList(next));
    return;
  }
  if (!belowSince_) belowSince_ = now;
  if (now - *belowSince_ < limits_.elasticTimeout) return;
  const std::string reason = "only " + std::to_string(next.size()) + " worker(s) left, below --min-np " +
                             std::to_string(limits_.minNp) + ", for " +
                             formatSeconds(seconds(limits_.elasticTimeout)) +
                             " s (--elastic-timeout); stopping";
  giveUp(reason, {Failure{-1, reason, 1}}, "the job stayed below --min-np " + std::to_string(limits_.minNp));
}

void ElasticPolicy::giveUp(const std::string& reason, std::vector<Failure> fatal,
                           const std::string& headline) {
  phase_ = Phase::kGaveUp;
  outcome_.finished = false;
  outcome_.fatal = std::move(fatal);
  outcome_.headline = headline;
  // A worker's failure is reported with its output at the end; the launcher's own reason now.
  if (outcome_.fatal.front().rank < 0) note(reason, false);
  ElasticAction a;
  a.kind = ElasticAction::Kind::kFail;
  a.text = reason;
  actions_.push_back(std::move(a));
}

void ElasticPolicy::finish(int id) {
  phase_ = Phase::kFinishing;
  outcome_.finished = true;
  std::vector<int> stopped;
  for (Worker& w : workers_) {
    const std::optional<elastic::Membership>& members = formed_ ? formed_ : published_;
    if (!active(w) || (members && members->rankOf(w.id) >= 0)) continue;
    w.stopped = true;
    stopped.push_back(w.id);
    ElasticAction a;
    a.kind = ElasticAction::Kind::kStop;
    a.id = w.id;
    actions_.push_back(std::move(a));
  }
  std::string line = "worker " + std::to_string(id) + " finished: the job is finishing";
  if (stopped.empty())
    outcome_.story.push_back(line);
  else
    note(line + "; stopping the workers that are not members: " + idList(stopped));
}

std::vector<ElasticAction> ElasticPolicy::takeActions() {
  std::vector<ElasticAction> out;
  out.swap(actions_);
  return out;
}

std::vector<int> ElasticPolicy::waitingIds() const {
  std::vector<int> ids;
  if (phase_ != Phase::kRunning) return ids;
  for (const Worker& w : workers_)
    if (active(w) && !w.ready) ids.push_back(w.id);
  return ids;
}

bool ElasticPolicy::over() const {
  return phase_ != Phase::kRunning && aliveCount() == 0;
}

}  // namespace gyre::launcher
