// The requests on one slice: init, push (bsp, asp, ssp), pull, and the replicated updates a
// backup applies. Each runs under the slice's mutex.
#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "ps/server_core.h"

namespace gyre::ps {

void ServerCore::sliceRequest(Request request, Outbox& out) {
  const Header& h = request.header;
  const Table* t = table_.load(std::memory_order_acquire);
  const std::string what = std::string(toString(h.type)) + " of slice " + std::to_string(h.slice);
  if (t == nullptr) {
    out.push_back(
        errorReply(request, Status::kError, name_ + ": " + what + " before any worker declared the table"));
    return;
  }
  if (h.slice >= t->plan.slices.size()) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + what + ": unknown slice (the table has " +
                                 std::to_string(t->plan.slices.size()) + ")"));
    return;
  }
  const Slice& slice = t->plan.slices[h.slice];
  SliceState* s = t->slices[h.slice].get();
  if (s == nullptr) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + describe(h, *t) + " is on server " +
                                 std::to_string(slice.primary) +
                                 (slice.backup >= 0 ? " (backup " + std::to_string(slice.backup) + ")" : "") +
                                 ", not on this one"));
    return;
  }
  std::size_t floats = 0;
  if (h.type == Type::kInit || h.type == Type::kPush || h.type == Type::kReplicateInit) floats = slice.length;
  if (h.type == Type::kReplicate) floats = slice.length + h.worker * (kContributorBytes / sizeof(float));
  if (request.floats.size() != floats) {  // its payload was skipped: it arrived before the declaration
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + describe(h, *t) + " arrived before the table was declared"));
    return;
  }
  const bool fromWorker = h.type == Type::kInit || h.type == Type::kPush || h.type == Type::kPull;
  if (fromWorker && h.worker >= t->declaration.numWorkers) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + describe(h, *t) + " from worker " + std::to_string(h.worker) +
                                 ": the job has " + std::to_string(t->declaration.numWorkers) + " workers"));
    return;
  }
  MutexLock lock(s->mutex);
  if (fromWorker && slice.primary != options_.index && !s->promoted) {
    s->promoted = true;
    log::warn(name_, ": taking over slice ", slice.id, " (key ", slice.key, ", [", slice.offset, ", ",
              slice.offset + slice.length, ")) from server ", slice.primary);
  }
  switch (h.type) {
    case Type::kInit:
      initLocked(*s, std::move(request), out);
      break;
    case Type::kPush:
      pushLocked(*s, std::move(request), out);
      break;
    case Type::kPull:
      pullLocked(*s, std::move(request), out);
      return;
    case Type::kReplicate:
      replicateLocked(*s, std::move(request), out);
      break;
    case Type::kReplicateInit:
      replicateInitLocked(*s, std::move(request), out);
      break;
    default:
      GYRE_THROW(Error, "not a slice request: ", h.debugString());
  }
  wakeLocked(*s, out);
}

bool ServerCore::replicates(const SliceState& s) const {
  return s.slice.primary == options_.index && s.slice.backup >= 0 && backup_ && !backup_->gone();
}

void ServerCore::initLocked(SliceState& s, Request request, Outbox& out) {
  if (s.initialized) {  // a resend after a failover, or a second initializer: the first values stay
    out.push_back(okReply(request, s.version));
    return;
  }
  s.params = std::move(request.floats);
  s.version = 0;
  s.initialized = true;
  if (replicates(s)) {
    Header init;
    init.type = Type::kReplicateInit;
    init.slice = static_cast<std::uint32_t>(s.slice.id);
    auto copy = std::make_shared<std::vector<float>>(s.params);
    const Waiter w{request.from, request.header};
    if (backup_->send(init, copy, copy->size() * sizeof(float), [w] { answer(w, Status::kOk, 0, 0); }))
      return;
  }
  out.push_back(okReply(request));
}

void ServerCore::pushLocked(SliceState& s, Request request, Outbox& out) {
  if (!s.initialized) {
    s.parked.push_back(std::move(request));
    return;
  }
  const Header& h = request.header;
  const Table& t = *table_.load(std::memory_order_acquire);
  std::int64_t& next = s.nextSeq[h.worker];
  if (h.a < 0 || h.a > next) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + describe(h, t) + ": seq gap: worker " + std::to_string(h.worker) +
                                 " sent push number " + std::to_string(h.a) + ", the next one is " +
                                 std::to_string(next)));
    return;
  }
  if (h.a < next) {  // a resend of an update already applied (after a failover)
    out.push_back(okReply(request, s.version, 0));
    return;
  }
  if (t.declaration.spec.mode.consistency == Consistency::kBsp) {
    bspPushLocked(s, std::move(request), out);
    return;
  }
  next = h.a + 1;
  const std::size_t n = s.slice.length;
  const float scale = 1.0f / static_cast<float>(t.declaration.numWorkers);
  std::shared_ptr<std::vector<float>> update;
  std::span<float> g(request.floats);
  if (replicates(s)) {  // the gradient goes to the backup, with one contributor after it
    update = std::make_shared<std::vector<float>>(n + kContributorBytes / sizeof(float));
    g = std::span<float>(update->data(), n);
    for (std::size_t i = 0; i < n; ++i) g[i] = request.floats[i] * scale;
  } else {
    for (float& x : g) x *= scale;
  }
  const std::int64_t staleness = std::max<std::int64_t>(0, s.version - h.b);
  applyUpdate(t.declaration.spec.optimizer, h.lr, s.params, g, s.optimizer);
  ++s.version;
  countUpdate(staleness);
  const Contributor contributor{h.worker, h.a};
  finishUpdate(s, h.lr, std::move(update), std::span<const Contributor>(&contributor, 1),
               {Waiter{request.from, request.header}}, staleness, out);
}

void ServerCore::bspPushLocked(SliceState& s, Request request, Outbox& out) {
  const Header& h = request.header;
  const Table& t = *table_.load(std::memory_order_acquire);
  const std::uint32_t workers = t.declaration.numWorkers;
  if (s.contributedSeq[h.worker] >= 0) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": worker " + std::to_string(h.worker) + " pushed key " +
                                 std::to_string(s.slice.key) + " twice in step " + std::to_string(s.version) +
                                 " (slice " + std::to_string(s.slice.id) + ")"));
    return;
  }
  s.nextSeq[h.worker] = h.a + 1;
  s.contribution[h.worker] = std::move(request.floats);
  s.contributedSeq[h.worker] = h.a;
  ++s.contributors;
  s.lastLr = h.lr;
  s.bspWaiting.push_back(std::move(request));
  if (s.contributors < workers) return;

  // Every worker pushed: apply their average, summed in worker order so that the result does
  // not depend on the order in which the pushes arrived.
  const std::size_t n = s.slice.length;
  std::shared_ptr<std::vector<float>> update;
  std::span<float> g(s.contribution[0]);
  if (replicates(s)) {
    update = std::make_shared<std::vector<float>>(n + workers * (kContributorBytes / sizeof(float)));
    g = std::span<float>(update->data(), n);
    std::copy(s.contribution[0].begin(), s.contribution[0].end(), g.begin());
  }
  for (std::uint32_t w = 1; w < workers; ++w) {
    const float* c = s.contribution[w].data();
    for (std::size_t i = 0; i < n; ++i) g[i] += c[i];
  }
  const float scale = 1.0f / static_cast<float>(workers);
  for (float& x : g) x *= scale;
  applyUpdate(t.declaration.spec.optimizer, s.lastLr, s.params, g, s.optimizer);
  ++s.version;
  countUpdate(0);

  std::vector<Contributor> contributors(workers);
  for (std::uint32_t w = 0; w < workers; ++w) contributors[w] = Contributor{w, s.contributedSeq[w]};
  std::vector<Waiter> waiters;
  for (Request& r : s.bspWaiting) waiters.push_back(Waiter{std::move(r.from), r.header});
  s.bspWaiting.clear();
  std::fill(s.contributedSeq.begin(), s.contributedSeq.end(), -1);
  s.contributors = 0;
  for (auto& c : s.contribution) c = std::vector<float>();
  finishUpdate(s, s.lastLr, std::move(update), contributors, std::move(waiters), 0, out);
}

void ServerCore::finishUpdate(SliceState& s, float lr, std::shared_ptr<std::vector<float>> update,
                              std::span<const Contributor> contributors, std::vector<Waiter> waiters,
                              std::int64_t staleness, Outbox& out) {
  const std::int64_t version = s.version;
  if (update) {
    const std::size_t n = s.slice.length;
    encodeContributors(contributors, reinterpret_cast<std::uint8_t*>(update->data() + n));
    Header h;
    h.type = Type::kReplicate;
    h.slice = static_cast<std::uint32_t>(s.slice.id);
    h.a = version;
    h.lr = lr;
    h.worker = static_cast<std::uint32_t>(contributors.size());
    const std::size_t bytes = n * sizeof(float) + contributors.size() * kContributorBytes;
    auto shared = std::make_shared<std::vector<Waiter>>(std::move(waiters));
    if (backup_->send(h, update, bytes, [shared, version, staleness] {
          for (const Waiter& w : *shared) answer(w, Status::kOk, version, staleness);
        }))
      return;
    waiters = std::move(*shared);
  }
  for (Waiter& w : waiters) {
    Reply reply;
    reply.to = std::move(w);
    reply.a = version;
    reply.b = staleness;
    out.push_back(std::move(reply));
  }
}

void ServerCore::pullLocked(SliceState& s, Request request, Outbox& out) {
  if (!s.initialized || s.version < request.header.a) {
    s.parked.push_back(std::move(request));
    return;
  }
  Reply reply = okReply(request, s.version);
  reply.floats = s.params;
  out.push_back(std::move(reply));
}

void ServerCore::replicateLocked(SliceState& s, Request request, Outbox& out) {
  const Header& h = request.header;
  const Table& t = *table_.load(std::memory_order_acquire);
  const std::string what = name_ + ": replicated update " + std::to_string(h.a) + " of " + describe(h, t);
  if (s.slice.backup != options_.index) {
    out.push_back(errorReply(request, Status::kError, what + ": this server is not the slice's backup"));
    return;
  }
  if (s.promoted) {
    out.push_back(errorReply(request, Status::kError,
                             what + ": this server took the slice over from server " +
                                 std::to_string(s.slice.primary) + " and no longer follows it"));
    return;
  }
  if (!s.initialized) {
    out.push_back(errorReply(request, Status::kError, what + ": the slice was never initialized here"));
    return;
  }
  if (h.a != s.version + 1) {
    log::error(what, " does not follow version ", s.version, ": this backup has diverged from its primary");
    out.push_back(
        errorReply(request, Status::kError, what + ": expected version " + std::to_string(s.version + 1)));
    return;
  }
  const std::size_t n = s.slice.length;
  const auto* tail = reinterpret_cast<const std::uint8_t*>(request.floats.data() + n);
  const std::vector<Contributor> contributors =
      decodeContributors(std::span<const std::uint8_t>(tail, h.worker * kContributorBytes));
  for (const Contributor& c : contributors) {
    if (c.worker >= t.declaration.numWorkers)
      GYRE_THROW(ProtocolError, what, " names worker ", c.worker, " (the job has ", t.declaration.numWorkers,
                 " workers)");
  }
  applyUpdate(t.declaration.spec.optimizer, h.lr, s.params, std::span<const float>(request.floats.data(), n),
              s.optimizer);
  s.version = h.a;
  for (const Contributor& c : contributors) s.nextSeq[c.worker] = std::max(s.nextSeq[c.worker], c.seq + 1);
  replicated_.fetch_add(1, std::memory_order_relaxed);
  out.push_back(okReply(request, s.version));
}

void ServerCore::replicateInitLocked(SliceState& s, Request request, Outbox& out) {
  if (s.slice.backup != options_.index) {
    const Table& t = *table_.load(std::memory_order_acquire);
    out.push_back(
        errorReply(request, Status::kError,
                   name_ + ": " + describe(request.header, t) + ": this server is not the slice's backup"));
    return;
  }
  if (!s.initialized) {
    s.params = std::move(request.floats);
    s.version = 0;
    s.initialized = true;
  }
  out.push_back(okReply(request));
}

// Serves the parked requests that can go on now, in arrival order: pushes that waited for the
// initial values, pulls that waited for them or for a version.
void ServerCore::wakeLocked(SliceState& s, Outbox& out) {
  while (s.initialized && !s.parked.empty()) {
    const std::int64_t before = s.version;
    std::vector<Request> parked = std::move(s.parked);
    s.parked.clear();
    for (Request& r : parked) {
      if (r.from && r.from->dead()) continue;
      if (r.header.type == Type::kPush)
        pushLocked(s, std::move(r), out);
      else
        pullLocked(s, std::move(r), out);
    }
    if (s.version == before) break;  // the pulls parked again wait for a later update
  }
}

}  // namespace gyre::ps
