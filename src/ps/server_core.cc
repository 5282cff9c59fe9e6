// The table, clocks, time-outs and answers of a parameter server; the slice requests themselves
// are in server_slice.cc.
#include "ps/server_core.h"

#include <algorithm>
#include <sstream>

#include "common/check.h"
#include "common/logging.h"

namespace gyre::ps {
namespace {

// Slices on this server times workers: the entries of per-worker slice state (sequence numbers,
// bsp contributions) a declaration may ask for, so that no declaration exhausts memory.
constexpr std::size_t kMaxWorkerState = std::size_t{1} << 26;

std::string describeOptimizer(const OptimizerOptions& o) {
  std::ostringstream out;
  if (o.kind == OptimizerOptions::Kind::kAdam)
    out << "adam(beta1=" << o.beta1 << ", beta2=" << o.beta2 << ", eps=" << o.eps;
  else
    out << "sgd(momentum=" << o.momentum;
  out << ", weight decay=" << o.weightDecay << ")";
  return out.str();
}

// How `got` differs from the table's declaration, for the refusal message.
// The same table, shapes compared only when both declare them (TableSpec::shapes: empty is not
// compared).
bool sameTable(const Declaration& a, const Declaration& b) {
  if (!a.spec.shapes.empty() && !b.spec.shapes.empty()) return a == b;
  Declaration x = a, y = b;
  x.spec.shapes.clear();
  y.spec.shapes.clear();
  return x == y;
}

std::string difference(const Declaration& got, const Declaration& table, const std::string& who) {
  std::ostringstream out;
  out << who << " declared ";
  const auto& sizes = got.spec.sizes;
  const auto& tableSizes = table.spec.sizes;
  if (sizes.size() != tableSizes.size()) {
    out << sizes.size() << " keys, the table has " << tableSizes.size();
    return out.str();
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] != tableSizes[k]) {
      out << "key " << k << " with " << sizes[k] << " elements, the table has " << tableSizes[k];
      return out.str();
    }
  }
  const auto shape = [](const std::vector<std::int64_t>& dims) {
    std::string text = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
  };
  // Shapes are compared when both sides give them (sameTable); then they have one per key.
  if (!got.spec.shapes.empty() && !table.spec.shapes.empty()) {
    for (std::size_t k = 0; k < got.spec.shapes.size(); ++k) {
      if (got.spec.shapes[k] != table.spec.shapes[k]) {
        out << "key " << k << " with shape " << shape(got.spec.shapes[k]) << ", the table has "
            << shape(table.spec.shapes[k]);
        return out.str();
      }
    }
  }
  if (!(got.spec.mode == table.spec.mode)) {
    out << "mode " << got.spec.mode.toString() << ", the table has " << table.spec.mode.toString();
  } else if (!(got.spec.optimizer == table.spec.optimizer)) {
    out << "optimizer " << describeOptimizer(got.spec.optimizer) << ", the table has "
        << describeOptimizer(table.spec.optimizer);
  } else if (got.spec.replicate != table.spec.replicate) {
    out << (got.spec.replicate ? "replication on" : "replication off") << ", the table has it "
        << (table.spec.replicate ? "on" : "off");
  } else if (got.numWorkers != table.numWorkers) {
    out << got.numWorkers << " workers, the table has " << table.numWorkers;
  } else {
    for (std::size_t s = 0; s < got.servers.size(); ++s) {
      if (got.servers[s] != table.servers[s]) {
        out << "server " << s << " at " << got.servers[s] << ", the table has it at " << table.servers[s];
        break;
      }
    }
  }
  return out.str();
}

std::string workerList(const std::vector<std::int64_t>& seqs) {
  std::string out;
  for (std::size_t w = 0; w < seqs.size(); ++w) {
    if (seqs[w] >= 0) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(w);
  }
  return out;
}

}  // namespace

ServerCore::SliceState::SliceState(const Slice& s, std::uint32_t numWorkers)
    : slice(s), nextSeq(numWorkers, 0), contribution(numWorkers), contributedSeq(numWorkers, -1) {}

ServerCore::ServerCore(const ServerOptions& options)
    : options_(options), name_("ps server " + std::to_string(options.index)) {
  GYRE_ARG_CHECK(options.numServers >= 1 && static_cast<std::size_t>(options.numServers) <= kMaxServers,
                 "a parameter-server job needs 1 to ", kMaxServers, " servers, not ", options.numServers);
  GYRE_ARG_CHECK(options.index >= 0 && options.index < options.numServers, "parameter-server index ",
                 options.index, " out of range for ", options.numServers, " servers");
  GYRE_ARG_CHECK(options.timeout.count() > 0, "the parameter-server timeout must be positive, not ",
                 options.timeout.count(), " ms");
  if (options.numServers > 1)
    backup_ = std::make_unique<BackupLink>(options.index, (options.index + 1) % options.numServers,
                                           options.secret, options.timeout);
}

ServerCore::~ServerCore() {
  backup_.reset();
}

std::optional<std::size_t> ServerCore::sliceLength(std::uint32_t slice) const {
  const Table* t = table_.load(std::memory_order_acquire);
  if (t == nullptr || slice >= t->plan.slices.size()) return std::nullopt;
  return t->plan.slices[slice].length;
}

std::uint32_t ServerCore::numWorkers() const {
  const Table* t = table_.load(std::memory_order_acquire);
  return t == nullptr ? 0 : t->declaration.numWorkers;
}

void ServerCore::handle(Request request) {
  Outbox out;
  request.deadline = Clock::now() + options_.timeout;
  switch (request.header.type) {
    case Type::kDeclare:
      declare(request, out);
      break;
    case Type::kStats: {
      Reply reply = okReply(request);
      reply.bytes = encodeServerStats(stats());
      out.push_back(std::move(reply));
      break;
    }
    case Type::kClock:
      clock(std::move(request), out);
      break;
    case Type::kHello:
      out.push_back(errorReply(request, Status::kError, name_ + ": a second hello on one connection"));
      break;
    default:
      sliceRequest(std::move(request), out);
      break;
  }
  flush(out);
}

void ServerCore::declare(Request& request, Outbox& out) {
  Declaration d = decodeDeclaration(request.bytes);  // ProtocolError: the caller closes the connection
  const std::uint32_t worker = request.from ? request.from->worker() : request.header.worker;
  const std::string who = worker == kServerPeer ? "a server" : "worker " + std::to_string(worker);
  if (d.servers.size() != static_cast<std::size_t>(options_.numServers)) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": " + who + " declared " + std::to_string(d.servers.size()) +
                                 " servers, this server was started as one of " +
                                 std::to_string(options_.numServers)));
    return;
  }
  MutexLock lock(declareMutex_);
  if (const Table* t = table_.load(std::memory_order_acquire)) {
    if (sameTable(d, t->declaration)) {
      out.push_back(okReply(request));
    } else {
      out.push_back(errorReply(request, Status::kError,
                               name_ + ": refused the declaration: " + difference(d, t->declaration, who)));
    }
    return;
  }
  auto table = std::make_unique<Table>();
  table->plan = Plan::make(d.spec.sizes, options_.numServers, d.spec.replicate);
  std::size_t here = 0;
  for (const Slice& slice : table->plan.slices)
    here += slice.primary == options_.index || slice.backup == options_.index ? 1 : 0;
  if (here * d.numWorkers > kMaxWorkerState) {
    std::ostringstream text;
    text << name_ << ": refused the declaration: " << here << " slices here times " << d.numWorkers
         << " workers is more per-worker state than a server keeps (" << kMaxWorkerState << ")";
    out.push_back(errorReply(request, Status::kError, text.str()));
    return;
  }
  table->slices.resize(table->plan.slices.size());
  for (const Slice& slice : table->plan.slices) {
    if (slice.primary == options_.index || slice.backup == options_.index)
      table->slices[static_cast<std::size_t>(slice.id)] = std::make_unique<SliceState>(slice, d.numWorkers);
  }
  {
    MutexLock clocks(clockMutex_);
    clocks_.assign(d.numWorkers, 0);
  }
  if (backup_)
    backup_->setAddress(d.servers[static_cast<std::size_t>((options_.index + 1) % options_.numServers)]);
  log::info(name_, ": table declared by ", who, ": ", d.spec.sizes.size(), " keys, ",
            table->plan.slices.size(), " slices, mode ", d.spec.mode.toString(), ", ", d.numWorkers,
            " workers");
  table->declaration = std::move(d);
  tableOwner_ = std::move(table);
  table_.store(tableOwner_.get(), std::memory_order_release);
  out.push_back(okReply(request));
}

// --- clocks -------------------------------------------------------------------------------------

std::int64_t ServerCore::minClock() const {
  return clocks_.empty() ? 0 : *std::min_element(clocks_.begin(), clocks_.end());
}

bool ServerCore::clockDue(std::int64_t clock) const {
  const Mode& mode = table_.load(std::memory_order_acquire)->declaration.spec.mode;
  return mode.consistency != Consistency::kSsp || minClock() >= clock - mode.staleness;
}

void ServerCore::clock(Request request, Outbox& out) {
  const Header& h = request.header;
  const Table* t = table_.load(std::memory_order_acquire);
  if (t == nullptr) {
    out.push_back(
        errorReply(request, Status::kError, name_ + ": clock before any worker declared the table"));
    return;
  }
  if (h.worker >= t->declaration.numWorkers) {
    out.push_back(errorReply(request, Status::kError,
                             name_ + ": clock of worker " + std::to_string(h.worker) + ": the job has " +
                                 std::to_string(t->declaration.numWorkers) + " workers"));
    return;
  }
  MutexLock lock(clockMutex_);
  std::int64_t& mine = clocks_[h.worker];
  mine = std::max(mine, h.a);
  if (clockDue(h.a))
    out.push_back(okReply(request, minClock()));
  else
    clockWaiting_.push_back(std::move(request));
  wakeClocks(out);
}

void ServerCore::wakeClocks(Outbox& out) {
  std::erase_if(clockWaiting_, [&](const Request& r) GYRE_REQUIRES(clockMutex_) {
    if (r.from && r.from->dead()) return true;
    if (!clockDue(r.header.a)) return false;
    out.push_back(okReply(r, minClock()));
    return true;
  });
}

// --- time-outs ----------------------------------------------------------------------------------

std::string ServerCore::describe(const Header& h, const Table& table) const {
  std::string out(toString(h.type));
  if (h.slice < table.plan.slices.size()) out += " of key " + std::to_string(table.plan.slices[h.slice].key);
  return out + " (slice " + std::to_string(h.slice) + ")";
}

void ServerCore::expireSlice(SliceState& s, const Table& table, Clock::time_point now, Outbox& out) {
  std::ostringstream waited;
  waited << " waited " << std::chrono::duration<double>(options_.timeout).count() << " s for ";
  std::erase_if(s.parked, [&](const Request& r) GYRE_REQUIRES(s.mutex) {
    if (r.from && r.from->dead()) return true;
    if (r.deadline > now) return false;
    std::string what = !s.initialized ? "the key to be initialized"
                                      : "version " + std::to_string(r.header.a) +
                                            " (the slice is at version " + std::to_string(s.version) + ")";
    out.push_back(
        errorReply(r, Status::kTimeout, name_ + ": " + describe(r.header, table) + waited.str() + what));
    return true;
  });
  std::erase_if(s.bspWaiting, [&](const Request& r) GYRE_REQUIRES(s.mutex) {
    if (r.from && r.from->dead()) return true;
    if (r.deadline > now) return false;
    out.push_back(errorReply(r, Status::kTimeout,
                             name_ + ": " + describe(r.header, table) + waited.str() + "step " +
                                 std::to_string(s.version) + ": workers " + workerList(s.contributedSeq) +
                                 " have not pushed"));
    return true;
  });
}

void ServerCore::expire(Clock::time_point now) {
  const Table* t = table_.load(std::memory_order_acquire);
  if (t == nullptr) return;
  Outbox out;
  for (const auto& slice : t->slices) {
    if (!slice) continue;
    MutexLock lock(slice->mutex);
    expireSlice(*slice, *t, now, out);
  }
  {
    MutexLock lock(clockMutex_);
    std::erase_if(clockWaiting_, [&](const Request& r) GYRE_REQUIRES(clockMutex_) {
      if (r.from && r.from->dead()) return true;
      if (r.deadline > now) return false;
      std::string behind;
      for (std::size_t w = 0; w < clocks_.size(); ++w) {
        if (clocks_[w] >= r.header.a - t->declaration.spec.mode.staleness) continue;
        behind +=
            (behind.empty() ? "" : ", ") + std::to_string(w) + " (at " + std::to_string(clocks_[w]) + ")";
      }
      std::ostringstream text;
      text << name_ << ": clock " << r.header.a << " of worker " << r.header.worker << " waited "
           << std::chrono::duration<double>(options_.timeout).count()
           << " s for the slowest worker to reach clock " << r.header.a - t->declaration.spec.mode.staleness
           << ": workers " << behind << " are behind";
      out.push_back(errorReply(r, Status::kTimeout, text.str()));
      return true;
    });
  }
  flush(out);
}

// --- answers ------------------------------------------------------------------------------------

ServerCore::Reply ServerCore::okReply(const Request& r, std::int64_t a, std::int64_t b) {
  Reply reply;
  reply.to = Waiter{r.from, r.header};
  reply.a = a;
  reply.b = b;
  return reply;
}

ServerCore::Reply ServerCore::errorReply(const Request& r, Status status, const std::string& text) const {
  log::debug(text);
  Reply reply = okReply(r);
  reply.status = status;
  const std::size_t n = std::min(text.size(), kMaxMessageTextBytes);
  reply.bytes.assign(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(n));
  return reply;
}

void ServerCore::answer(const Waiter& w, Status status, std::int64_t a, std::int64_t b,
                        std::span<const std::uint8_t> payload) {
  if (!w.to || w.to->dead()) return;
  Header h = w.header;
  h.response = true;
  h.status = status;
  h.a = a;
  h.b = b;
  w.to->respond(h, payload);
}

void ServerCore::flush(Outbox& out) const {
  for (const Reply& r : out) {
    if (!r.floats.empty()) {
      answer(r.to, r.status, r.a, r.b,
             std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(r.floats.data()),
                                           r.floats.size() * sizeof(float)));
    } else {
      answer(r.to, r.status, r.a, r.b, r.bytes);
    }
  }
  out.clear();
}

ServerStats ServerCore::stats() const {
  ServerStats s;
  s.updates = updates_.load();
  s.replicated = replicated_.load();
  s.bytesIn = bytesIn_.load();
  s.bytesOut = bytesOut_.load();
  s.refusedConnections = refused_.load();
  for (std::size_t i = 0; i < staleness_.size(); ++i) s.staleness[i] = staleness_[i].load();
  return s;
}

void ServerCore::countUpdate(std::int64_t staleness) {
  updates_.fetch_add(1, std::memory_order_relaxed);
  const auto bucket = std::clamp<std::int64_t>(staleness, 0, WorkerStats::kMaxStaleness);
  staleness_[static_cast<std::size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace gyre::ps
